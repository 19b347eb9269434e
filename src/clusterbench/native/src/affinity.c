/* clusterbench affinity: where each MPI rank and OpenMP thread really runs.
 *
 * Every thread of every rank reports its host, rank, thread number, the CPU it is running on
 * (sched_getcpu) and the CPUs it is allowed on (sched_getaffinity), so a placement can be
 * checked against what was asked. Rank 0 gathers and prints one line per thread:
 *   host=<h> rank=<r> thread=<t> cpu=<c> allowed=<list>
 *
 * Usage: affinity [HOLD_MS]
 *   HOLD_MS: every thread stays busy this long after reporting, so a sampler watching /proc
 *   (clusterbench's placement probe) sees all of them in place, after MPI_Init's own moves.
 *
 * A rank that waits for the others sleeps between tests instead of spinning in a blocking
 * collective: a placement under test may put several ranks on one CPU (a default binding narrowed
 * by OMP_PLACES, or nodes of a virtual cluster sharing cores), and a spinning waiter there can
 * starve the very rank it waits for for minutes.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define LINE 1024
#define MAX_THREADS 1024

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Wait for a non-blocking operation, sleeping 1 ms between tests (see the header). */
static void wait_sleeping(MPI_Request *request) {
    const struct timespec pause = {0, 1000000};
    int done = 0;
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
    while (!done) {
        nanosleep(&pause, NULL);
        MPI_Test(request, &done, MPI_STATUS_IGNORE);
    }
}

static void cpulist(const cpu_set_t *set, char *out, size_t len) {
    out[0] = '\0';
    int first = -1, prev = -2;
    size_t used = 0;
    for (int cpu = 0; cpu <= CPU_SETSIZE; cpu++) {
        const int in = cpu < CPU_SETSIZE && CPU_ISSET(cpu, set);
        if (in && first < 0) first = cpu;
        if (!in && first >= 0) {
            used += snprintf(out + used, len - used, "%s%d", used ? "," : "", first);
            if (prev > first) used += snprintf(out + used, len - used, "-%d", prev);
            first = -1;
        }
        if (in) prev = cpu;
        if (used >= len - 16) break;
    }
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    const double hold_s = argc > 1 ? atof(argv[1]) / 1000.0 : 0.0;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char host[MPI_MAX_PROCESSOR_NAME];
    int len;
    MPI_Get_processor_name(host, &len);
    int nthreads = 1;
#ifdef _OPENMP
    nthreads = omp_get_max_threads();
#endif
    if (nthreads > MAX_THREADS) nthreads = MAX_THREADS;
    char *mine = calloc((size_t)nthreads, LINE);
#pragma omp parallel num_threads(nthreads)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        cpu_set_t set;
        CPU_ZERO(&set);
        sched_getaffinity(0, sizeof(set), &set);
        char list[LINE - 128];
        cpulist(&set, list, sizeof(list));
        snprintf(mine + (size_t)t * LINE, LINE, "host=%s rank=%d thread=%d cpu=%d allowed=%s", host, rank, t,
                 sched_getcpu(), list);
        const double until = now_s() + (hold_s > 0 && hold_s < 3600 ? hold_s : 0);
        while (now_s() < until) {
        }
    }
    int counts[1] = {nthreads};
    int *all_counts = rank == 0 ? malloc(sizeof(int) * size) : NULL;
    MPI_Request request;
    MPI_Igather(counts, 1, MPI_INT, all_counts, 1, MPI_INT, 0, MPI_COMM_WORLD, &request);
    wait_sleeping(&request);
    int *displs = NULL, *bytes = NULL, total = 0;
    if (rank == 0) {
        displs = malloc(sizeof(int) * size);
        bytes = malloc(sizeof(int) * size);
        for (int r = 0; r < size; r++) { bytes[r] = all_counts[r] * LINE; displs[r] = total; total += bytes[r]; }
    }
    char *lines = rank == 0 ? malloc((size_t)total) : NULL;
    MPI_Igatherv(mine, nthreads * LINE, MPI_CHAR, lines, bytes, displs, MPI_CHAR, 0, MPI_COMM_WORLD, &request);
    wait_sleeping(&request);
    if (rank == 0) {
        printf("# clusterbench affinity: %d rank(s)\n", size);
        for (int i = 0; i < total / LINE; i++) printf("%s\n", lines + (size_t)i * LINE);
        printf("# done\n");
    }
    MPI_Finalize();
    return 0;
}
