/* clusterbench dgemm: the rate of the BLAS DGEMM the run loads (C = A x B, N x N), checked.
 *
 * Calls the Fortran BLAS symbol dgemm_ from libblas.so.3, so whichever BLAS variant the run
 * puts first on LD_LIBRARY_PATH is what is measured. Best of REPS timed calls after one
 * warm-up; Gflop/s = 2 N^3 / time. The result is checked on sampled entries against a plain
 * dot product (relative error within 1e3 x N x DBL_EPSILON).
 *
 * With -DUSE_MPI every rank multiplies its own matrices at the same time (HPCC's "star" DGEMM);
 * rank 0 prints the per-rank min/avg/max and the aggregate.
 *
 * Usage: dgemm N REPS
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include "cb_common.h"

void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k, const double *alpha,
            const double *a, const int *lda, const double *b, const int *ldb, const double *beta, double *c,
            const int *ldc, size_t transa_len, size_t transb_len);  /* hidden Fortran string lengths */

int main(int argc, char **argv) {
    int rank, size;
    cb_init(&argc, &argv, &rank, &size);
    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "usage: %s N REPS\n", argv[0]);
        return 2;
    }
    const int n = atoi(argv[1]), reps = atoi(argv[2]);
    double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n), *c = malloc(sizeof(double) * n * n);
    if (!a || !b || !c) {
        fprintf(stderr, "rank %d: cannot allocate 3 x %d^2 doubles\n", rank, n);
        return 3;
    }
    srand48(42 + rank);
    for (long i = 0; i < (long)n * n; i++) { a[i] = drand48() - 0.5; b[i] = drand48() - 0.5; c[i] = 0.0; }
    const double one = 1.0, zero = 0.0;
    dgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);  /* warm-up */
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
#ifdef USE_MPI
        MPI_Barrier(MPI_COMM_WORLD);
#endif
        double t = cb_now();
        dgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n, 1, 1);
        t = cb_now() - t;
        if (t < best) best = t;
    }
    /* Check sampled entries (column-major): C[i,j] = sum_k A[i,k] B[k,j]. */
    double worst = 0;
    for (int s = 0; s < 64; s++) {
        const int i = (int)(drand48() * n), j = (int)(drand48() * n);
        double ref = 0, mag = 0;
        for (int k = 0; k < n; k++) { ref += a[i + (long)k * n] * b[k + (long)j * n]; mag += fabs(a[i + (long)k * n] * b[k + (long)j * n]); }
        const double err = fabs(c[i + (long)j * n] - ref) / (mag > 0 ? mag : 1);
        if (err > worst) worst = err;
    }
    const double limit = 1e3 * n * DBL_EPSILON;
    int ok = worst <= limit;
    double gflops = 2.0 * n * (double)n * n / best * 1e-9, lo = gflops, hi = gflops, total = gflops;
    double worst_all = worst;
    int all_ok = ok;
#ifdef USE_MPI
    MPI_Reduce(&gflops, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&gflops, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&gflops, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&worst, &worst_all, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, 0, MPI_COMM_WORLD);
#endif
    if (rank == 0) {
        printf("# clusterbench dgemm: N = %d, reps = %d, ranks = %d\n", n, reps, size);
        printf("best time per rank (s): %.6f\n", best);
        printf("per-rank Gflop/s: min %.3f avg %.3f max %.3f\n", lo, total / size, hi);
        printf("aggregate Gflop/s: %.3f\n", total);
        printf("max relative error of sampled entries: %.3e (limit %.3e)\n", worst_all, limit);
        printf("%s\n", all_ok ? "Check PASSED" : "Check FAILED");
    }
    free(a); free(b); free(c);
    cb_finalize();
    return 0;
}
