/* platform.h: what differs between operating systems, in one place. Everything
   else in core/ is ISO C11 plus POSIX threads (mingw-w64's winpthreads on
   Windows) and the helpers below. platform_posix.c serves Linux (and, untested,
   macOS: only the library names and clocks there would differ); platform_win32.c
   serves Windows (mingw-w64). docs/platforms.md. */
#ifndef EMBER_PLATFORM_H
#define EMBER_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- shared libraries: the one file name of each, as the OS names it */
#if defined(_WIN32)
#define EMBER_LIB_NAME(base) base ".dll"
#elif defined(__APPLE__)
#define EMBER_LIB_NAME(base) "lib" base ".dylib"
#else
#define EMBER_LIB_NAME(base) "lib" base ".so"
#endif
/* Loads a library (its own symbols kept to itself); NULL on failure, with the
   loader's message in err. */
void *ember__lib_open(const char *path, char *err, size_t cap);
/* The library if the process has it loaded already, else NULL (loads nothing). */
void *ember__lib_loaded(const char *name);
/* A function's address in it, or NULL (a data pointer: the caller memcpys it). */
void *ember__lib_symbol(void *lib, const char *name);
void ember__lib_close(void *lib);
/* The path of the file that holds the code at addr (libember's own, for one of
   its functions); false where it cannot be told. */
bool ember__lib_path_of(const void *addr, char *buf, size_t cap);

/* ---- threads: fn(arg) runs when the calling thread exits (every thread the
   host starts, however it starts them); arg is non-NULL; one fn for the process */
void ember__at_thread_exit(void (*fn)(void *));

/* ---- time, CPUs, environment */
int64_t ember__now_ns(void);          /* a monotonic clock */
int ember__usable_cpus(void);         /* this process may run on (affinity), at least 1 */
int ember__online_cpus(void);         /* the machine's, at least 1 */
int ember__runnable_threads(void);    /* machine-wide run queue, -1 where the OS does not say */
int ember__env_set(const char *name, const char *value);   /* value NULL: unset; 0 on success */

/* ---- memory: blocks aligned to align (a power of two), freed with ember__aligned_free */
void *ember__aligned_alloc(size_t align, size_t nbytes);
void ember__aligned_free(void *p);
/* Huge pages: ember__huge_pages() says whether the OS gives them on request
   (Linux: madvise(MADV_HUGEPAGE), transparent huge pages not "never"); where
   it does, ember__huge_alloc gives a block of nbytes (a multiple of
   EMBER_HUGE_PAGE) aligned to EMBER_HUGE_PAGE and asks for them, NULL when out
   of memory (where it does not, NULL on Windows, 4 KiB pages elsewhere);
   freed with ember__huge_free(p, nbytes). */
#define EMBER_HUGE_PAGE ((size_t)2 << 20)
bool ember__huge_pages(void);
void *ember__huge_alloc(size_t nbytes);
void ember__huge_free(void *p, size_t nbytes);

/* ---- files: descriptors of the C library's own (open, read, write, close) */
enum { EMBER_FILE_REGULAR = 1, EMBER_FILE_DIR = 2, EMBER_FILE_OTHER = 3 };
/* Opens for reading without blocking on a FIFO; -1 with errno set. UTF-8 paths. */
int ember__file_open_read(const char *path);
/* Its kind (EMBER_FILE_*) and size; -1 with errno set. */
int ember__file_stat(int fd, int *kind, uint64_t *size);
/* The size of the file at path, or -1. */
int64_t ember__path_size(const char *path);
/* Reads up to n bytes at off without moving the file position: bytes read, 0 at
   the end, -1 with errno set (EINTR: try again). */
int64_t ember__file_read_at(int fd, void *buf, size_t n, uint64_t off);
/* Writes up to n bytes: bytes written or -1 with errno set (EINTR: try again). */
int64_t ember__file_write(int fd, const void *buf, size_t n);
/* Creates path, which must not exist yet, for writing; -1 with errno set (EEXIST). */
int ember__file_create_new(const char *path);
int ember__file_sync(int fd);         /* to the disk; 0 or -1 with errno */
int ember__file_close(int fd);        /* 0 or -1 with errno */
/* Moves from over to, replacing to at once (readers see the old file or the new
   one, never a mix); 0 or -1 with errno. */
int ember__file_replace(const char *from, const char *to);
int ember__file_remove(const char *path);   /* 0 or -1 with errno */
/* Flushes the folder holding path (its entry for a file just renamed there);
   best effort: a no-op where the OS has no such thing. */
void ember__dir_sync(const char *path);
/* Calls fn(name, arg) for each entry of folder dir; false if it cannot be read. */
bool ember__dir_each(const char *dir, void (*fn)(const char *name, void *arg), void *arg);
long ember__process_id(void);
/* The process pid may still be running (it exists, or it cannot be told). */
bool ember__process_alive(long pid);
/* The last folder separator in path ('/', and '\\' on Windows), or NULL. */
const char *ember__path_last_sep(const char *path);

#endif
