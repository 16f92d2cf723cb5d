// SC_HD marks math that compiles for both the host and CUDA devices: the CPU backend loops
// over these functions and the CUDA launchers call the very same ones from their kernels.
#pragma once

#if defined(__CUDACC__)
#define SC_HD __host__ __device__
#else
#define SC_HD
#endif
