/* platform_posix.c: platform.h on POSIX systems (Linux with glibc; macOS is
   untested: it would need only its dylib names and clocks, which POSIX gives). */
#ifndef _WIN32
#define _GNU_SOURCE   /* dladdr, RTLD_NOLOAD, sched_getaffinity, CPU_COUNT, O_DIRECTORY */
#include "platform.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void *ember__lib_open(const char *path, char *err, size_t cap)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h && cap) {
        const char *e = dlerror();
        snprintf(err, cap, "%s", e ? e : path);
    }
    return h;
}

void *ember__lib_loaded(const char *name) { return dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD); }
void *ember__lib_symbol(void *lib, const char *name) { return lib ? dlsym(lib, name) : NULL; }
void ember__lib_close(void *lib)
{
    if (lib) dlclose(lib);
}

bool ember__lib_path_of(const void *addr, char *buf, size_t cap)
{
    Dl_info info;
    if (!dladdr(addr, &info) || !info.dli_fname) return false;
    int n = snprintf(buf, cap, "%s", info.dli_fname);
    return n >= 0 && (size_t)n < cap;
}

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
/* the handler the calling thread asks for: pthread_once runs make_key on the
   first caller's thread, which reads its own (threads share no variable
   here, so two first calls at once do not race) */
static _Thread_local void (*asked_fn)(void *);
static void make_key(void) { pthread_key_create(&exit_key, asked_fn); }

void ember__at_thread_exit(void (*fn)(void *))
{
    asked_fn = fn;
    pthread_once(&exit_once, make_key);
    pthread_setspecific(exit_key, (void *)1);
}

int64_t ember__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int ember__online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int ember__usable_cpus(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0) return c;
    }
#endif
    return ember__online_cpus();
}

/* The 4th field of /proc/loadavg, "R/T": runnable threads on the machine.
   The file stays open (read again with pread, no allocation). */
static int loadavg_fd = -1;
static pthread_once_t loadavg_once = PTHREAD_ONCE_INIT;
static void open_loadavg(void) { loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC); }

int ember__runnable_threads(void)
{
    pthread_once(&loadavg_once, open_loadavg);
    if (loadavg_fd < 0) return -1;
    char buf[128];
    ssize_t n = pread(loadavg_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = 0;
    const char *p = buf;
    for (int field = 0; field < 3; field++) {
        p = strchr(p, ' ');
        if (!p) return -1;
        p++;
    }
    char *end;
    long r = strtol(p, &end, 10);
    return end != p && *end == '/' && r >= 0 ? (int)r : -1;
}

int ember__env_set(const char *name, const char *value) { return value ? setenv(name, value, 1) : unsetenv(name); }

void *ember__aligned_alloc(size_t align, size_t nbytes)
{
    void *p = NULL;
    return posix_memalign(&p, align, nbytes) == 0 ? p : NULL;
}

void ember__aligned_free(void *p) { free(p); }

/* Huge pages through Linux's transparent huge pages: an anonymous mapping
   trimmed to EMBER_HUGE_PAGE alignment and madvise(MADV_HUGEPAGE)d, which the
   kernel then faults in 2 MiB at a time (with THP "madvise", Debian's
   default, nothing else gets them). Where MADV_HUGEPAGE is not defined, or
   THP is "never" or absent, this does not serve. */
bool ember__huge_pages(void)
{
#ifdef MADV_HUGEPAGE
    char buf[128] = {0};
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, "[always]") || strstr(buf, "[madvise]");
#else
    return false;
#endif
}

void *ember__huge_alloc(size_t nbytes)
{
    if (nbytes == 0 || nbytes % EMBER_HUGE_PAGE || nbytes > SIZE_MAX - EMBER_HUGE_PAGE)
        return NULL;
    size_t span = nbytes + EMBER_HUGE_PAGE;   /* room to align the start */
    char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    char *p = (char *)(((uintptr_t)m + EMBER_HUGE_PAGE - 1) & ~(uintptr_t)(EMBER_HUGE_PAGE - 1));
    if (p > m) munmap(m, (size_t)(p - m));
    if (m + span > p + nbytes) munmap(p + nbytes, (size_t)(m + span - (p + nbytes)));
#ifdef MADV_HUGEPAGE
    madvise(p, nbytes, MADV_HUGEPAGE);   /* refused (an old kernel): 4 KiB pages, still a good block */
#endif
    return p;
}

void ember__huge_free(void *p, size_t nbytes)
{
    if (p) munmap(p, nbytes);
}

int ember__file_open_read(const char *path) { return open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); }

int ember__file_stat(int fd, int *kind, uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) != 0) return -1;
    *kind = S_ISREG(st.st_mode) ? EMBER_FILE_REGULAR : S_ISDIR(st.st_mode) ? EMBER_FILE_DIR : EMBER_FILE_OTHER;
    *size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    return 0;
}

int64_t ember__path_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_size >= 0 ? (int64_t)st.st_size : -1;
}

int64_t ember__file_read_at(int fd, void *buf, size_t n, uint64_t off) { return pread(fd, buf, n, (off_t)off); }
int64_t ember__file_write(int fd, const void *buf, size_t n) { return write(fd, buf, n); }

int ember__file_create_new(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC, 0666);
}

int ember__file_sync(int fd) { return fsync(fd); }
int ember__file_close(int fd) { return close(fd); }
int ember__file_replace(const char *from, const char *to) { return rename(from, to); }
int ember__file_remove(const char *path) { return unlink(path); }

void ember__dir_sync(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash) snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    else snprintf(dir, sizeof dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);   /* best effort: some file systems refuse a folder's fsync */
        close(fd);
    }
}

bool ember__dir_each(const char *dir, void (*fn)(const char *name, void *arg), void *arg)
{
    DIR *d = opendir(dir);
    if (!d) return false;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) fn(e->d_name, arg);
    closedir(d);
    return true;
}

long ember__process_id(void) { return (long)getpid(); }
bool ember__process_alive(long pid) { return kill((pid_t)pid, 0) == 0 || errno != ESRCH; }
const char *ember__path_last_sep(const char *path) { return strrchr(path, '/'); }
#endif
