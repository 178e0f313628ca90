/* ember/io.h: files: IDX, and the safetensors codec.
   A part of ember.h, which includes the parts in order (its conventions hold
   here): include <ember.h>, not this file. */
#ifndef EMBER_H
#error "ember/io.h is a part of ember.h: include <ember.h>"
#endif

/* ffi:begin */
/* ---- io ---- */
/* Reads an IDX file (gzip'd or plain): big-endian magic 0 0 type ndim, the
   dims, then the data. uint8 stays uint8; int8 and int16 become int32. */
EMBER_API int ember_load_idx(const char *path, ember_tensor **out);
/* safetensors files: ember's one codec (core/src/io/; ember.save and
   ember.load go through it). The reader checks every length, offset, shape
   and string of a file (strict JSON, ranges that tile the data exactly)
   before it reads or allocates tensor data; messages read "load: <path>:
   <what>". The writer writes a temporary beside the file, fsyncs it and
   renames it over it (temporaries left by a writer that was killed are
   removed first); messages read "save: <path>: <what>".
   ember_save / ember_load: a list of named tensors. ember_load reads every
   tensor to the CPU, in file order; the list owns them: ember_named_tensor
   borrows one (retain it to keep it past ember_named_free). */
typedef struct ember_named_tensors ember_named_tensors;
EMBER_API int ember_save(const char *path, int n, const char *const *names, ember_tensor *const *tensors);
EMBER_API int ember_load(const char *path, ember_named_tensors **out);
EMBER_API int ember_named_count(const ember_named_tensors *list);
EMBER_API const char *ember_named_name(const ember_named_tensors *list, int i);
EMBER_API ember_tensor *ember_named_tensor(const ember_named_tensors *list, int i);
/* The first tensor whose name (as ember_named_name gives it) is `name`
   (borrowed), or NULL when there is none or list or name is NULL. */
EMBER_API ember_tensor *ember_named_find(const ember_named_tensors *list, const char *name);
EMBER_API void ember_named_free(ember_named_tensors *list);
/* Removes `<path>.tmp.<pid>.*` files whose writing process is gone; returns
   how many (ember_save calls it too). */
EMBER_API int ember_remove_stale_temps(const char *path);
/* The whole codec: names and strings with their lengths (they may hold any
   UTF-8, a NUL included), metadata (a string map), the header alone.
   ember_st_save writes "__metadata__" (nmeta >= 0; nmeta = 0 an empty one,
   nmeta < 0 none) and then the entries, each in the given order; names and
   metadata must be valid UTF-8 and distinct, "__metadata__" names no tensor.
   Tensors on another device are copied to the CPU one at a time. */
enum { EMBER_ST_MAX_HEADER = 100000000 };   /* the largest header a reader takes, in bytes */
typedef struct ember_st_named {
    const char *name;
    size_t name_len;
    ember_tensor *tensor;
} ember_st_named;
typedef struct ember_st_kv {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
} ember_st_kv;
EMBER_API int ember_st_save(const char *path, int n, const ember_st_named *entries, int nmeta, const ember_st_kv *meta);
/* ember_st_open reads and checks the header (the file stays open until
   ember_st_close); entries are in file order. ember_st_entry's outputs may
   be NULL; the strings and shape belong to the file. ember_st_read reads
   entry i into a new CPU tensor (bool bytes other than 0 become 1). */
typedef struct ember_st_file ember_st_file;
EMBER_API int ember_st_open(const char *path, ember_st_file **out);
EMBER_API int ember_st_count(const ember_st_file *f);
EMBER_API int ember_st_entry(const ember_st_file *f, int i, const char **name, size_t *name_len, int *dtype, int *ndim,
                             const int64_t **shape, uint64_t *begin, uint64_t *end);
EMBER_API int ember_st_meta_count(const ember_st_file *f);
EMBER_API int ember_st_meta(const ember_st_file *f, int i, const char **key, size_t *key_len, const char **value,
                            size_t *value_len);
EMBER_API int ember_st_read(ember_st_file *f, int i, ember_tensor **out);
EMBER_API void ember_st_close(ember_st_file *f);
/* The safetensors name of a dtype ("F32", "BOOL", ...), NULL for none. */
EMBER_API const char *ember_st_dtype_name(int dtype);
/* ffi:end */
