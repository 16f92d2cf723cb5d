// SC_VECTOR_CLONES: on x86-64 with GCC, one clone of the function per vector width (AVX-512,
// AVX2 + FMA, SSE2), picked at load time, so one build runs at vector speed on any x86-64;
// elsewhere (ARM64, clang) the function as compiled.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SC_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SC_VECTOR_CLONES
#endif
