/* What clusterbench's C kernels share: a wall clock, and MPI start-up when built with MPI. */
#ifndef CB_COMMON_H
#define CB_COMMON_H
#include <sys/time.h>
#ifdef USE_MPI
#include <mpi.h>
#endif

static double cb_now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + 1e-6 * tv.tv_usec;
}

/* Rank and size (0 and 1 without MPI). */
static void cb_init(int *argc, char ***argv, int *rank, int *size) {
    *rank = 0;
    *size = 1;
#ifdef USE_MPI
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
#else
    (void)argc;
    (void)argv;
#endif
}

/* All ranks at the same point (no-op without MPI): star kernels start and stop together. */
static void cb_sync(void) {
#ifdef USE_MPI
    MPI_Barrier(MPI_COMM_WORLD);
#endif
}

static void cb_finalize(void) {
#ifdef USE_MPI
    MPI_Finalize();
#endif
}
#endif
