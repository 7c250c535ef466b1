// c_stdint_text.h — the <stdint.h> types and limit macros (LP64, as glibc's), as source
// text shared by the host-C stand-in headers (host_headers.cpp) and the CUDA device
// prelude (device_headers.cpp), so both parsers see the same definitions.
#pragma once

#define KDFLOW_STDINT_TYPES_TEXT          \
  "typedef signed char int8_t;\n"        \
  "typedef short int16_t;\n"             \
  "typedef int int32_t;\n"               \
  "typedef long int64_t;\n"              \
  "typedef unsigned char uint8_t;\n"     \
  "typedef unsigned short uint16_t;\n"   \
  "typedef unsigned int uint32_t;\n"     \
  "typedef unsigned long uint64_t;\n"    \
  "typedef long intptr_t;\n"             \
  "typedef unsigned long uintptr_t;\n"

#define KDFLOW_STDINT_LIMITS_TEXT                 \
  "#define INT8_MIN (-128)\n"                     \
  "#define INT16_MIN (-32767-1)\n"                \
  "#define INT32_MIN (-2147483647-1)\n"           \
  "#define INT64_MIN (-9223372036854775807L-1)\n" \
  "#define INT8_MAX 127\n"                        \
  "#define INT16_MAX 32767\n"                     \
  "#define INT32_MAX 2147483647\n"                \
  "#define INT64_MAX 9223372036854775807L\n"      \
  "#define UINT8_MAX 255\n"                       \
  "#define UINT16_MAX 65535\n"                    \
  "#define UINT32_MAX 4294967295U\n"              \
  "#define UINT64_MAX 18446744073709551615UL\n"
