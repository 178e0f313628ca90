/* gemm_layout.h: how a row-major strided matrix is handed to cuBLAS, which
   is column-major. ember's C = A B (row-major) is C^T = B^T A^T to cuBLAS,
   so each operand X (rows x cols, element [r][c] at r rs + c cs) is passed
   as X^T, a cols x rows column-major matrix: as stored (no transpose, ld =
   rs) when cs is 1, or as X itself transposed by cuBLAS (ld = cs) when rs is
   1. Any other layout is copied to a contiguous one first. Here so that
   cuda/tests/ checks it against the CPU's products on any machine. */
#ifndef EMBER_CUDA_GEMM_LAYOUT_H
#define EMBER_CUDA_GEMM_LAYOUT_H

#include <stdint.h>

typedef struct ecu_gemm_operand {
    int64_t offset;   /* elements from the storage's start to X[0][0] */
    bool transpose;   /* cuBLAS's op: CUBLAS_OP_T when set */
    int64_t ld;
} ecu_gemm_operand;

/* false when neither dim has unit stride (or a broadcast dim leaves no valid ld) */
static inline bool ecu_gemm_layout(int64_t offset, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                                   ecu_gemm_operand *o)
{
    int64_t min_rows = rows > 1 ? rows : 1, min_cols = cols > 1 ? cols : 1;
    o->offset = offset;
    if (cs == 1 || cols == 1) {   /* X^T as stored: column r of it starts at r rs */
        o->transpose = false;
        o->ld = rows == 1 ? min_cols : rs;
        if (o->ld >= min_cols) return true;
    }
    if (rs == 1 || rows == 1) {   /* X stored column-major, ld = cs: cuBLAS transposes it */
        o->transpose = true;
        o->ld = cols == 1 ? min_rows : cs;
        if (o->ld >= min_rows) return true;
    }
    return false;
}

#endif
