// A stand-in for NVML's library (libnvidia-ml.so.1) with the three calls the harness makes, for
// driver_release_test.cpp: the release is "580.159.04" unless FAKE_NVML_INIT_FAILS is set.
#include <cstdlib>
#include <cstring>

extern "C" {

int nvmlInit_v2() { return std::getenv("FAKE_NVML_INIT_FAILS") != nullptr ? 999 : 0; }

int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  const char release[] = "580.159.04";
  if (length < sizeof release) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::memcpy(version, release, sizeof release);
  return 0;
}

int nvmlShutdown() { return 0; }

}  // extern "C"
