/* platform_win32.c: platform.h on Windows (built with mingw-w64, tested under
   Wine: docs/platforms.md). Paths are UTF-8, converted to the wide (UTF-16)
   calls; descriptors are the C runtime's, over Win32 handles. */
#ifdef _WIN32
#include "platform.h"

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <malloc.h>
#include <process.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <windows.h>

/* ember.dll is never unloaded (as libember.so is linked -z nodelete,
   CMakeLists.txt says why): its worker threads and their thread-exit
   handlers stay mapped. Its destructors then run only at exit. */
__attribute__((constructor)) static void pin_self(void)
{
    HMODULE self;
    GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN, (LPCWSTR)(void *)pin_self,
                       &self);
}

/* path as UTF-16 in a new buffer (free it), or NULL with errno set */
static wchar_t *wide(const char *path)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, NULL, 0);
    if (n <= 0) {
        errno = EINVAL;
        return NULL;
    }
    wchar_t *w = malloc((size_t)n * sizeof *w);
    if (!w) {
        errno = ENOMEM;
        return NULL;
    }
    MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, w, n);
    return w;
}

/* GetLastError's code as errno, for the messages of the callers */
static int set_errno_from_win32(void)
{
    DWORD e = GetLastError();
    switch (e) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND: errno = ENOENT; break;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION: errno = EACCES; break;
    case ERROR_FILE_EXISTS:
    case ERROR_ALREADY_EXISTS: errno = EEXIST; break;
    case ERROR_HANDLE_EOF: errno = 0; break;
    case ERROR_DISK_FULL: errno = ENOSPC; break;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY: errno = ENOMEM; break;
    default: errno = EIO; break;
    }
    return -1;
}

static void win32_message(char *buf, size_t cap, const char *what)
{
    DWORD e = GetLastError();
    char msg[256] = "";
    DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, e, 0, msg,
                             sizeof msg, NULL);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r' || msg[n - 1] == ' ')) msg[--n] = 0;
    snprintf(buf, cap, "%s: %s (error %lu)", what, n ? msg : "cannot be loaded", (unsigned long)e);
}

void *ember__lib_open(const char *path, char *err, size_t cap)
{
    wchar_t *w = wide(path);
    HMODULE h = w ? LoadLibraryW(w) : NULL;
    if (!h && cap) win32_message(err, cap, path);
    free(w);
    return (void *)h;
}

void *ember__lib_loaded(const char *name) { return (void *)GetModuleHandleA(name); }

void *ember__lib_symbol(void *lib, const char *name)
{
    if (!lib) return NULL;
    FARPROC f = GetProcAddress((HMODULE)lib, name);
    void *p;
    memcpy(&p, &f, sizeof p);   /* ISO C: function to object pointer */
    return p;
}

void ember__lib_close(void *lib)
{
    if (lib) FreeLibrary((HMODULE)lib);
}

bool ember__lib_path_of(const void *addr, char *buf, size_t cap)
{
    HMODULE m = NULL;
    if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            (LPCWSTR)addr, &m))
        return false;
    wchar_t w[32768];
    DWORD n = GetModuleFileNameW(m, w, sizeof w / sizeof *w);
    if (n == 0 || n >= sizeof w / sizeof *w) return false;
    return WideCharToMultiByte(CP_UTF8, 0, w, -1, buf, (int)(cap < 0x7fffffff ? cap : 0x7fffffff), NULL, NULL) > 0;
}

/* A fiber-local slot's callback runs at the exit of every thread that set it,
   also those the host started with CreateThread or another pthreads copy. */
static DWORD exit_slot = FLS_OUT_OF_INDEXES;
static INIT_ONCE exit_once = INIT_ONCE_STATIC_INIT;
static void (*exit_fn)(void *);
static void WINAPI on_exit_slot(void *arg)
{
    if (arg) exit_fn(arg);
}
/* the first caller's handler, written once inside the one-time init (whose
   completion orders it before every later read) */
static BOOL CALLBACK make_slot(INIT_ONCE *once, void *param, void **ctx)
{
    (void)once, (void)ctx;
    exit_fn = *(void (**)(void *))param;
    exit_slot = FlsAlloc(on_exit_slot);
    return TRUE;
}

void ember__at_thread_exit(void (*fn)(void *))
{
    InitOnceExecuteOnce(&exit_once, make_slot, &fn, NULL);
    if (exit_slot != FLS_OUT_OF_INDEXES) FlsSetValue(exit_slot, (void *)1);
}

int64_t ember__now_ns(void)
{
    static LARGE_INTEGER freq;   /* fixed at boot: a benign race writes the same value */
    LARGE_INTEGER t;
    if (!freq.QuadPart) QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&t);
    return (int64_t)(t.QuadPart / freq.QuadPart) * 1000000000 +
           (int64_t)(t.QuadPart % freq.QuadPart) * 1000000000 / freq.QuadPart;
}

int ember__online_cpus(void)
{
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n > 0 ? (int)n : 1;
}

int ember__usable_cpus(void)
{
    DWORD_PTR proc, sys;
    if (GetProcessAffinityMask(GetCurrentProcess(), &proc, &sys) && proc) {
        int c = 0;
        for (; proc; proc &= proc - 1) c++;
        return c;
    }
    return ember__online_cpus();
}

int ember__runnable_threads(void) { return -1; }   /* Windows has no run-queue length to read */

int ember__env_set(const char *name, const char *value) { return _putenv_s(name, value ? value : "") == 0 ? 0 : -1; }

void *ember__aligned_alloc(size_t align, size_t nbytes) { return _aligned_malloc(nbytes, align); }
void ember__aligned_free(void *p) { _aligned_free(p); }

/* no huge pages here (large pages need SeLockMemoryPrivilege): the allocator keeps 4 KiB pages */
bool ember__huge_pages(void) { return false; }
void *ember__huge_alloc(size_t nbytes)
{
    (void)nbytes;
    return NULL;
}
void ember__huge_free(void *p, size_t nbytes)
{
    (void)p;
    (void)nbytes;
}

int ember__file_open_read(const char *path)
{
    wchar_t *w = wide(path);
    if (!w) return -1;
    int fd = _wopen(w, _O_RDONLY | _O_BINARY | _O_NOINHERIT);
    free(w);
    return fd;
}

int ember__file_stat(int fd, int *kind, uint64_t *size)
{
    struct _stat64 st;
    if (_fstat64(fd, &st) != 0) return -1;
    *kind = (st.st_mode & _S_IFMT) == _S_IFREG ? EMBER_FILE_REGULAR
            : (st.st_mode & _S_IFMT) == _S_IFDIR ? EMBER_FILE_DIR
                                                 : EMBER_FILE_OTHER;
    *size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    return 0;
}

int64_t ember__path_size(const char *path)
{
    wchar_t *w = wide(path);
    struct _stat64 st;
    int64_t r = w && _wstat64(w, &st) == 0 && st.st_size >= 0 ? (int64_t)st.st_size : -1;
    free(w);
    return r;
}

int64_t ember__file_read_at(int fd, void *buf, size_t n, uint64_t off)
{
    HANDLE h = (HANDLE)_get_osfhandle(fd);
    if (h == INVALID_HANDLE_VALUE) {
        errno = EBADF;
        return -1;
    }
    OVERLAPPED o;
    memset(&o, 0, sizeof o);
    o.Offset = (DWORD)off;
    o.OffsetHigh = (DWORD)(off >> 32);
    DWORD got = 0, want = n > 0x40000000 ? 0x40000000 : (DWORD)n;
    if (!ReadFile(h, buf, want, &got, &o)) return GetLastError() == ERROR_HANDLE_EOF ? 0 : set_errno_from_win32();
    return (int64_t)got;
}

int64_t ember__file_write(int fd, const void *buf, size_t n)
{
    return _write(fd, buf, n > 0x40000000 ? 0x40000000u : (unsigned)n);
}

int ember__file_create_new(const char *path)
{
    wchar_t *w = wide(path);
    if (!w) return -1;
    int fd = _wopen(w, _O_WRONLY | _O_CREAT | _O_EXCL | _O_TRUNC | _O_BINARY | _O_NOINHERIT, _S_IREAD | _S_IWRITE);
    free(w);
    return fd;
}

int ember__file_sync(int fd) { return _commit(fd); }
int ember__file_close(int fd) { return _close(fd); }

int ember__file_replace(const char *from, const char *to)
{
    wchar_t *wf = wide(from), *wt = wf ? wide(to) : NULL;
    int r = -1;
    if (wt) r = MoveFileExW(wf, wt, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH) ? 0 : set_errno_from_win32();
    free(wf);
    free(wt);
    return r;
}

int ember__file_remove(const char *path)
{
    wchar_t *w = wide(path);
    int r = w ? _wunlink(w) : -1;
    free(w);
    return r;
}

void ember__dir_sync(const char *path) { (void)path; }   /* MoveFileEx's write-through covers the entry */

bool ember__dir_each(const char *dir, void (*fn)(const char *name, void *arg), void *arg)
{
    char pattern[4096];
    int n = snprintf(pattern, sizeof pattern, "%s\\*", dir);
    if (n < 0 || (size_t)n >= sizeof pattern) return false;
    wchar_t *w = wide(pattern);
    if (!w) return false;
    WIN32_FIND_DATAW fd;
    HANDLE h = FindFirstFileW(w, &fd);
    free(w);
    if (h == INVALID_HANDLE_VALUE) return false;
    do {
        char name[MAX_PATH * 4];
        if (WideCharToMultiByte(CP_UTF8, 0, fd.cFileName, -1, name, sizeof name, NULL, NULL) > 0) fn(name, arg);
    } while (FindNextFileW(h, &fd));
    FindClose(h);
    return true;
}

long ember__process_id(void) { return (long)GetCurrentProcessId(); }

bool ember__process_alive(long pid)
{
    HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (!h) return GetLastError() != ERROR_INVALID_PARAMETER;   /* no such process */
    DWORD code = 0;
    bool alive = GetExitCodeProcess(h, &code) && code == STILL_ACTIVE;
    CloseHandle(h);
    return alive;
}

const char *ember__path_last_sep(const char *path)
{
    const char *a = strrchr(path, '/'), *b = strrchr(path, '\\');
    if (!a || !b) return a ? a : b;
    return a > b ? a : b;
}
#endif
