/* clusterbench fmaclock: the core clock as the FMA units see it, for efficiency against a measured peak.
 *
 * Nominal peak (cores x base GHz x flops/cycle) is what a vendor promises; a node that throttles,
 * runs a powersave governor or boosts above base reaches something else. This kernel measures what
 * one core sustains: CHAINS independent vector FMA chains (c = c * m + a), enough of them to hide
 * the FMA latency on every pipe (latency 4-5 cycles x 2-4 pipes <= CHAINS), at the widest vector
 * width the compiler targets (-O3 -march=native: 8 doubles with AVX-512, 4 with AVX2, 2 with
 * SSE2/NEON). GCC vector extensions pin the width: the auto-vectoriser's preferred width (256 bits
 * on some AVX-512 parts) would otherwise halve the figure. m is just below 1 and a is small, so
 * every chain converges to a/(1-m) and no value overflows or turns denormal (which would be slow).
 *
 * Dividing the Gflop/s by the core's DP flops/cycle (clusterbench.system.microarch) gives GHz.
 * Not an MPI program: one thread, pinned to the CPU it is given (default: the last CPU it may run
 * on, away from CPU 0 where interrupts tend to land). It runs in about ten slices and reports the
 * best slice (the clock when nothing else ran) and the mean over all of them.
 *
 * Usage: fmaclock [--ms N (10..5000, default 100)] [--cpu N]
 * Output: one "key value" line each: gflops, gflops_mean, seconds, vector_doubles, chains,
 * flops_per_iteration, fma, cpu, slices, iterations, checksum.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__AVX512F__)
#define VBYTES 64
#define CHAINS 16 /* 32 vector registers */
#elif defined(__AVX__)
#define VBYTES 32
#define CHAINS 12 /* 16 registers: 12 chains + m + a */
#elif defined(__aarch64__) || defined(__ARM_NEON) || defined(__VSX__)
#define VBYTES 16
#define CHAINS 16 /* 32 (or 64) vector registers, up to 4 FMA pipes on recent Arm cores */
#elif defined(__SSE2__)
#define VBYTES 16
#define CHAINS 12
#else
#define VBYTES 8
#define CHAINS 8
#endif

#if defined(__FMA__) || defined(__ARM_FEATURE_FMA) || defined(__aarch64__) || defined(__VSX__)
#define HAS_FMA 1
#else
#define HAS_FMA 0
#endif

#define VDOUBLES (VBYTES / 8)
typedef double vd __attribute__((vector_size(VBYTES)));

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* `iters` iterations of CHAINS independent FMAs; noinline so each slice is the same code. */
static void __attribute__((noinline)) chains(vd *c, vd m, vd a, long iters) {
    vd r[CHAINS];
    for (int k = 0; k < CHAINS; k++) r[k] = c[k];
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int k = 0; k < CHAINS; k++) r[k] = r[k] * m + a;
    }
    for (int k = 0; k < CHAINS; k++) c[k] = r[k];
}

static int parse_int(const char *text, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* The CPU to run on: the one asked for, else the last one this process may use. */
static int pin(long asked) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return asked >= 0 ? (int)asked : -1;
    int cpu = (int)asked;
    if (cpu < 0)
        for (int i = 0; i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &set)) cpu = i;
    if (cpu < 0) return -1;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return -2;
    return cpu;
}

int main(int argc, char **argv) {
    long ms = 100, cpu_arg = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ms") && i + 1 < argc) {
            if (!parse_int(argv[++i], 10, 5000, &ms)) {
                fprintf(stderr, "fmaclock: --ms must be a whole number of milliseconds in 10..5000\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--cpu") && i + 1 < argc) {
            if (!parse_int(argv[++i], 0, CPU_SETSIZE - 1, &cpu_arg)) {
                fprintf(stderr, "fmaclock: --cpu must be a CPU number in 0..%d\n", CPU_SETSIZE - 1);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: %s [--ms N (10..5000)] [--cpu N]\n", argv[0]);
            return 2;
        }
    }
    int cpu = pin(cpu_arg);
    if (cpu == -2) {
        fprintf(stderr, "fmaclock: cannot run on CPU %ld (not allowed or offline)\n", cpu_arg);
        return 2;
    }
    vd c[CHAINS], m, a;
    for (int j = 0; j < VDOUBLES; j++) {
        m[j] = 1.0 - 1e-9;
        a[j] = 1e-9;
    }
    for (int k = 0; k < CHAINS; k++)
        for (int j = 0; j < VDOUBLES; j++) c[k][j] = 1.0 + 0.001 * k + 0.0001 * j;

    /* Calibrate (which also warms the core up to its vector clock): double the iterations until
     * one call lasts 2 ms, then size a slice to a tenth of the run (at least 1 ms). */
    long iters = 1024;
    double t;
    for (;;) {
        double t0 = now();
        chains(c, m, a, iters);
        t = now() - t0;
        if (t >= 0.002 || iters > (1L << 40)) break;
        iters *= 2;
    }
    double slice_s = ms / 1000.0 / 10.0;
    if (slice_s < 0.001) slice_s = 0.001;
    long slice_iters = (long)(iters * (slice_s / t));
    if (slice_iters < 1) slice_iters = 1;

    const double flops_per_iter = 2.0 * VDOUBLES * CHAINS;
    double best = 0.0, total_s = 0.0, total_iters = 0.0;
    int slices = 0;
    while (total_s < ms / 1000.0 || slices < 3) {
        double t0 = now();
        chains(c, m, a, slice_iters);
        double dt = now() - t0;
        double rate = flops_per_iter * slice_iters / dt / 1e9;
        if (rate > best) best = rate;
        total_s += dt;
        total_iters += slice_iters;
        slices++;
    }
    double checksum = 0.0;
    for (int k = 0; k < CHAINS; k++)
        for (int j = 0; j < VDOUBLES; j++) checksum += c[k][j];

    printf("gflops %.4f\n", best);
    printf("gflops_mean %.4f\n", flops_per_iter * total_iters / total_s / 1e9);
    printf("seconds %.6f\n", total_s);
    printf("vector_doubles %d\n", VDOUBLES);
    printf("chains %d\n", CHAINS);
    printf("flops_per_iteration %.0f\n", flops_per_iter);
    printf("fma %d\n", HAS_FMA);
    printf("cpu %d\n", cpu);
    printf("slices %d\n", slices);
    printf("iterations %.0f\n", total_iters);
    printf("checksum %.6f\n", checksum);
    return 0;
}
