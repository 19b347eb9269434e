/* clusterbench pingpong: the IMB PingPong method between ranks 0 and 1 (others wait).
 *
 * For each message size (0, then 2^a .. 2^b bytes): warm-up exchanges as IMB 2021 makes them
 * (a tenth of the repetitions, at least 10 or all of them), then R repetitions of rank 0
 * sending and rank 1 sending back, from a send buffer into a separate receive buffer, both from
 * MPI_Alloc_mem, as IMB; the one-way time is the elapsed time
 * / (2R), in microseconds, and the bandwidth is size / one-way time in MB/s (10^6 bytes).
 * Repetitions follow IMB's default policy: R = min(ITER, max(1, OVERALL_VOL / size)) with
 * OVERALL_VOL = 40 MiB (or VOLUME bytes when given), so large messages are repeated fewer times;
 * policy "off" uses ITER for every size.
 * With MIN_SECONDS > 0 (dynamic policy), a size whose R repetitions would take less than that (as
 * its timed warm-up says) is repeated more, up to ITER: a measurement of a few milliseconds on a
 * fast link is moved by one wake-up of another process, one of a tenth of a second is not.
 *
 * With ROUNDS > 1, each size's timed loop is run ROUNDS times and the median round is printed, with the
 * fastest and slowest rounds' times: one round of a few milliseconds is moved by one wake-up of another
 * process, the median of several is not, and their spread says how steady the link was.
 *
 * Usage: pingpong MIN_LOG2 MAX_LOG2 ITER POLICY(dynamic|off) [VOLUME [MIN_SECONDS [ROUNDS]]]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OVERALL_VOL (40L * 1024 * 1024)
#define WARMUP_PERCENT 10
#define MIN_WARMUP 10
#define MAX_ROUNDS 50

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One repetition: rank 0 sends and receives back, rank 1 receives and sends back. */
static void exchange(int rank, int other, char *sbuf, char *rbuf, long bytes) {
    if (rank == 0) {
        MPI_Send(sbuf, bytes, MPI_CHAR, other, 1, MPI_COMM_WORLD);
        MPI_Recv(rbuf, bytes, MPI_CHAR, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(rbuf, bytes, MPI_CHAR, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(sbuf, bytes, MPI_CHAR, other, 1, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 5 || size < 2) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -np 2 %s MIN_LOG2 MAX_LOG2 ITER POLICY [VOLUME [MIN_SECONDS]]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const int lo = atoi(argv[1]), hi = atoi(argv[2]), iter = atoi(argv[3]);
    const int dynamic = strcmp(argv[4], "off") != 0;
    const long volume = argc > 5 && atol(argv[5]) > 0 ? atol(argv[5]) : OVERALL_VOL;
    const double min_seconds = argc > 6 && atof(argv[6]) > 0 ? atof(argv[6]) : 0.0;
    int rounds = argc > 7 ? atoi(argv[7]) : 1;
    if (rounds < 1) rounds = 1;
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    double times[MAX_ROUNDS];
    const long maxbytes = 1L << hi;
    /* Buffers from MPI_Alloc_mem, as IMB allocates them: the MPI may hand out memory it can move
     * faster (aligned, registered), and both programs then measure the same thing. */
    char *sbuf = NULL, *rbuf = NULL;
    MPI_Alloc_mem(maxbytes > 0 ? maxbytes : 1, MPI_INFO_NULL, &sbuf);
    MPI_Alloc_mem(maxbytes > 0 ? maxbytes : 1, MPI_INFO_NULL, &rbuf);
    memset(sbuf, 1, maxbytes > 0 ? maxbytes : 1);
    memset(rbuf, 0, maxbytes > 0 ? maxbytes : 1);
    char host[MPI_MAX_PROCESSOR_NAME];
    int len;
    MPI_Get_processor_name(host, &len);
    char peer[MPI_MAX_PROCESSOR_NAME] = "";
    if (rank == 1) MPI_Send(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, 9, MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Recv(peer, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("# clusterbench pingpong (IMB PingPong method)\n");
        printf("# ranks = %d, rank 0 on %s, rank 1 on %s\n", size, host, peer);
        printf("# iter = %d, policy = %s, overall volume = %ld bytes\n", iter, dynamic ? "dynamic" : "off",
               volume);
        if (min_seconds > 0) printf("# each size runs at least %g s (up to iter repetitions)\n", min_seconds);
        if (rounds > 1) printf("# rounds = %d: the median round, then the fastest and slowest\n", rounds);
        if (rounds > 1)
            printf("#%11s %12s %14s %14s %14s %14s\n", "bytes", "repetitions", "t[usec]", "MB/s", "t_min[usec]",
                   "t_max[usec]");
        else
            printf("#%11s %12s %14s %14s\n", "bytes", "repetitions", "t[usec]", "MB/s");
    }
    for (int k = lo - 1; k <= hi; k++) {  /* k = lo - 1 stands for the 0-byte message */
        const long bytes = k < lo ? 0 : 1L << k;
        long reps = iter;
        if (dynamic && bytes > 0 && volume / bytes < reps) reps = volume / bytes > 0 ? volume / bytes : 1;
        long warmup = reps / WARMUP_PERCENT;
        if (warmup < MIN_WARMUP) warmup = reps < MIN_WARMUP ? reps : MIN_WARMUP;
        const int other = 1 - rank;
        double t = MPI_Wtime();
        for (long r = 0; rank < 2 && r < warmup; r++) exchange(rank, other, sbuf, rbuf, bytes);
        t = MPI_Wtime() - t;
        if (min_seconds > 0 && dynamic) {  /* rank 0 decides from its timed warm-up; every rank hears it */
            if (rank == 0 && warmup > 0 && t > 0) {
                const double want = min_seconds / (t / warmup);
                if (want > reps) reps = want < iter ? (long)want + 1 : iter;
            }
            MPI_Bcast(&reps, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        }
        for (int round = 0; round < rounds; round++) {
            MPI_Barrier(MPI_COMM_WORLD);
            t = MPI_Wtime();
            for (long r = 0; rank < 2 && r < reps; r++) exchange(rank, other, sbuf, rbuf, bytes);
            times[round] = MPI_Wtime() - t;
        }
        if (rank == 0) {
            qsort(times, rounds, sizeof times[0], by_value);
            const double median = rounds % 2 ? times[rounds / 2] : (times[rounds / 2 - 1] + times[rounds / 2]) / 2;
            const double usec = 1e6 * median / (2.0 * reps);
            if (rounds > 1)
                printf("%12ld %12ld %14.2f %14.2f %14.2f %14.2f\n", bytes, reps, usec, usec > 0 ? bytes / usec : 0.0,
                       1e6 * times[0] / (2.0 * reps), 1e6 * times[rounds - 1] / (2.0 * reps));
            else
                printf("%12ld %12ld %14.2f %14.2f\n", bytes, reps, usec, usec > 0 ? bytes / usec : 0.0);
            fflush(stdout);
        }
    }
    if (rank == 0) printf("# done\n");
    MPI_Free_mem(sbuf);
    MPI_Free_mem(rbuf);
    MPI_Finalize();
    return 0;
}
