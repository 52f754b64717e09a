// SPECLAB_HD marks functions shared by host and device code (__host__ __device__ under nvcc).
// Headers that use it hold no Eigen and no std containers, so nvcc compiles them for sm_90.
#pragma once

#if defined(__CUDACC__)
#define SPECLAB_HD __host__ __device__
#else
#define SPECLAB_HD
#endif
