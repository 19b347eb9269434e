/* clusterbench stream: McCalpin's STREAM method (Copy, Scale, Add, Triad), written for clusterbench.
 *
 * Method (as in stream.c 5.10): three arrays of N doubles, NTIMES repetitions of each kernel,
 * the best time of repetitions 2..NTIMES (the first is excluded), bytes counted as STREAM
 * counts them (Copy/Scale 2 x 8 x N, Add/Triad 3 x 8 x N), MB = 10^6 bytes, and validation of
 * the final array values against the values the kernels must produce.
 *
 * With -DUSE_MPI every rank runs on its own arrays at the same time (HPCC's "star" mode): as in
 * HPCC 1.5, a barrier starts and ends every kernel, so the ranks share the memory system for
 * the whole timed interval. Rank 0 prints in STREAM's table the aggregate (all ranks' bytes
 * over the slowest rank's time, best repetition), the per-rank min/avg/max of each rank's own
 * best rate, and HPCC's StarSTREAM figure (a rank's bytes over the fastest rank's time).
 *
 * Usage: stream N NTIMES
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "cb_common.h"

int main(int argc, char **argv) {
    int rank, size;
    cb_init(&argc, &argv, &rank, &size);
    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "usage: %s N NTIMES\n", argv[0]);
        return 2;
    }
    const long n = atol(argv[1]);
    const int ntimes = atoi(argv[2]);
    if (n < 1 || ntimes < 2) {
        if (rank == 0) fprintf(stderr, "N must be >= 1 and NTIMES >= 2\n");
        return 2;
    }
    /* Page-aligned like stream.c's static arrays: malloc's large blocks start 16 bytes into a page,
     * so every vector store of a misaligned array straddles two cache lines (about 4% of Triad
     * on an AVX-512 Xeon). `restrict` tells the compiler, as static arrays do, that they never alias. */
    double *restrict a = NULL, *restrict b = NULL, *restrict c = NULL;
    const size_t array_bytes = sizeof(double) * (size_t)n;
    if (posix_memalign((void **)&a, 4096, array_bytes) || posix_memalign((void **)&b, 4096, array_bytes) ||
        posix_memalign((void **)&c, 4096, array_bytes)) {
        fprintf(stderr, "rank %d: cannot allocate 3 x %ld doubles\n", rank, n);
        return 3;
    }
    int threads = 1;
#pragma omp parallel
    {
#ifdef _OPENMP
#pragma omp master
        threads = omp_get_num_threads();
#endif
    }
    /* First touch by the threads that will use the data (NUMA placement). */
#pragma omp parallel for
    for (long j = 0; j < n; j++) { a[j] = 1.0; b[j] = 2.0; c[j] = 0.0; }
#pragma omp parallel for
    for (long j = 0; j < n; j++) a[j] = 2.0 * a[j];

    const double scalar = 3.0;
    double times[4][ntimes];
    for (int k = 0; k < ntimes; k++) {
        cb_sync();
        double t = cb_now();
#pragma omp parallel for
        for (long j = 0; j < n; j++) c[j] = a[j];
        cb_sync();
        times[0][k] = cb_now() - t;
        cb_sync();
        t = cb_now();
#pragma omp parallel for
        for (long j = 0; j < n; j++) b[j] = scalar * c[j];
        cb_sync();
        times[1][k] = cb_now() - t;
        cb_sync();
        t = cb_now();
#pragma omp parallel for
        for (long j = 0; j < n; j++) c[j] = a[j] + b[j];
        cb_sync();
        times[2][k] = cb_now() - t;
        cb_sync();
        t = cb_now();
#pragma omp parallel for
        for (long j = 0; j < n; j++) a[j] = b[j] + scalar * c[j];
        cb_sync();
        times[3][k] = cb_now() - t;
    }

    const char *label[4] = {"Copy:      ", "Scale:     ", "Add:       ", "Triad:     "};
    const double bytes[4] = {2.0 * sizeof(double) * n, 2.0 * sizeof(double) * n,
                             3.0 * sizeof(double) * n, 3.0 * sizeof(double) * n};
    double best[4], avg[4], worst[4], rate[4];
    for (int f = 0; f < 4; f++) {
        best[f] = FLT_MAX; avg[f] = 0; worst[f] = 0;
        for (int k = 1; k < ntimes; k++) {  /* the first repetition is excluded */
            avg[f] += times[f][k];
            if (times[f][k] < best[f]) best[f] = times[f][k];
            if (times[f][k] > worst[f]) worst[f] = times[f][k];
        }
        avg[f] /= (ntimes - 1);
        rate[f] = 1.0e-6 * bytes[f] / best[f];
    }

    /* Validation: replay the kernels on scalars, as STREAM's checkSTREAMresults does. */
    double aj = 1.0, bj = 2.0, cj = 0.0;
    aj = 2.0 * aj;
    for (int k = 0; k < ntimes; k++) { cj = aj; bj = scalar * cj; cj = aj + bj; aj = bj + scalar * cj; }
    double ea = 0, eb = 0, ec = 0;
    for (long j = 0; j < n; j++) { ea += fabs(a[j] - aj); eb += fabs(b[j] - bj); ec += fabs(c[j] - cj); }
    ea /= n; eb /= n; ec /= n;
    const double epsilon = 1.e-13;
    int ok = fabs(ea / aj) <= epsilon && fabs(eb / bj) <= epsilon && fabs(ec / cj) <= epsilon;

    double total[4], lo[4], hi[4], sum[4], star[4];
    int all_ok = ok;
#ifdef USE_MPI
    double slowest[4][ntimes], fastest[4][ntimes];
    MPI_Reduce(times, slowest, 4 * ntimes, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(times, fastest, 4 * ntimes, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    for (int f = 0; f < 4; f++) {
        double t_slow = FLT_MAX, t_fast = FLT_MAX;
        for (int k = 1; k < ntimes; k++) {
            if (slowest[f][k] < t_slow) t_slow = slowest[f][k];
            if (fastest[f][k] < t_fast) t_fast = fastest[f][k];
        }
        total[f] = 1.0e-6 * bytes[f] * size / t_slow;
        star[f] = 1.0e-6 * bytes[f] / t_fast;
    }
    MPI_Reduce(rate, sum, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(rate, lo, 4, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(rate, hi, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, 0, MPI_COMM_WORLD);
#else
    for (int f = 0; f < 4; f++) { total[f] = lo[f] = hi[f] = sum[f] = star[f] = rate[f]; }
#endif
    if (rank == 0) {
        printf("-------------------------------------------------------------\n");
        printf("STREAM version $Revision: 5.10 $ method, clusterbench kernel\n");
        printf("-------------------------------------------------------------\n");
        printf("This system uses %d bytes per array element.\n", (int)sizeof(double));
        printf("Array size = %ld (elements), Offset = 0 (elements)\n", n);
        printf("Each kernel will be executed %d times.\n", ntimes);
        printf("Number of Threads requested = %d\n", threads);
        printf("Number of Threads counted = %d\n", threads);
        printf("Number of MPI ranks = %d\n", size);
        printf("-------------------------------------------------------------\n");
        printf("Function    Best Rate MB/s  Avg time     Min time     Max time\n");
        for (int f = 0; f < 4; f++)
            printf("%s%12.1f  %11.6f  %11.6f  %11.6f\n", label[f], total[f], avg[f], best[f], worst[f]);
        printf("-------------------------------------------------------------\n");
        for (int f = 0; f < 4; f++)
            printf("Per-rank %s min %.1f avg %.1f max %.1f MB/s\n", label[f], lo[f], sum[f] / size, hi[f]);
        for (int f = 0; f < 4; f++)
            printf("HPCC-star %s %.1f MB/s\n", label[f], star[f]);
        if (all_ok)
            printf("Solution Validates: avg error less than %e on all three arrays\n", epsilon);
        else
            printf("Failed Validation: rank 0 avg errors a %e b %e c %e\n", ea, eb, ec);
    }
    free(a); free(b); free(c);
    cb_finalize();
    return 0;
}
