/* clusterbench: `main` for an xhpl built from the HPL inside HPCC.
 *
 * HPCC's HPL is a library whose driver is HPL_main(argc, argv, rdata, failure), called by
 * hpcc.c between MPI_Init and MPI_Finalize. This is all a standalone xhpl needs around it.
 * The exit status is 0 as with netlib's xhpl: a failed residual is reported in the output
 * (and clusterbench stores that run as invalid), not by the status.
 */
#include <mpi.h>
#include "hpl.h"

int main(int argc, char **argv) {
    HPL_RuntimeData rdata;
    int failure = 0;
    MPI_Init(&argc, &argv);
    HPL_main(argc, argv, &rdata, &failure);
    MPI_Finalize();
    return 0;
}
