// The CUDA driver loader: reasons when something is missing, and the calls
// the data path will make, against a fake driver (no GPU needed).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "fake_cuda.h"

namespace {

std::string reason() { return srd_cuda_get()->reason; }

TEST(CudaLoader, WithoutLibcudaSaysSo) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib) {
    dlclose(lib);
    GTEST_SKIP() << "this host has libcuda.so.1";
  }
  srd_cuda_set_test_ops(nullptr);
  const srd_cuda *cu = srd_cuda_get();
  EXPECT_FALSE(cu->usable);
  EXPECT_NE(std::string::npos, reason().find("cannot load libcuda.so.1")) << reason();
  // Every call answers with the reason instead of touching a missing driver.
  char err[256] = "";
  int dev = -1;
  EXPECT_EQ(-1, srd_cuda_pointer_device(cu, &dev, &dev, err, sizeof(err)));
  EXPECT_NE(std::string::npos, std::string(err).find("libcuda.so.1")) << err;
  EXPECT_EQ(-1, srd_cuda_dmabuf_supported(cu, 0));
  EXPECT_EQ(-1, srd_cuda_flush_rdma_writes(cu, err, sizeof(err)));
}

TEST(CudaLoader, FakeDriverIsUsable) {
  fake::Driver d;
  fake::state.devices = 3;
  const srd_cuda *cu = srd_cuda_get();
  EXPECT_TRUE(cu->usable) << cu->reason;
  EXPECT_EQ(12040, cu->driver_version);
  EXPECT_EQ(3, cu->device_count);
  EXPECT_EQ("CUDA driver 12.4, 3 device(s)", reason());
}

TEST(CudaLoader, CuInitFailureNamesTheDriverError) {
  fake::Driver d;
  fake::state.init_result = SRD_CUDA_ERROR_NO_DEVICE;
  EXPECT_FALSE(srd_cuda_get()->usable);
  EXPECT_EQ("cuInit failed: fake: no CUDA-capable device is detected", reason());
}

TEST(CudaLoader, MissingSymbolIsNamed) {
  srd_cuda_ops o = fake::ops();
  o.pointer_get_attribute = nullptr;
  fake::Driver d(o);
  EXPECT_FALSE(srd_cuda_get()->usable);
  EXPECT_EQ("the CUDA driver lacks cuPointerGetAttribute", reason());
}

TEST(CudaLoader, OptionalSymbolsMayBeMissing) {
  srd_cuda_ops o = fake::ops();
  o.mem_get_handle_for_address_range = nullptr;
  fake::Driver d(o);
  const srd_cuda *cu = srd_cuda_get();
  EXPECT_TRUE(cu->usable) << cu->reason;
  EXPECT_EQ(0, srd_cuda_dmabuf_supported(cu, 0)); // no export without the call
  int fd;
  uint64_t off;
  char err[256];
  EXPECT_EQ(-1, srd_cuda_dmabuf_fd(cu, &fd, 8, &fd, &off, err, sizeof(err)));
  EXPECT_STREQ("the CUDA driver cannot export dma-bufs", err);
}

TEST(CudaLoader, OldDriverIsRefused) {
  fake::Driver d;
  fake::state.driver_version = 11020;
  EXPECT_FALSE(srd_cuda_get()->usable);
  EXPECT_EQ("CUDA driver 11.2 is older than 11.3 (no cuFlushGPUDirectRDMAWrites)", reason());
}

TEST(CudaLoader, NoDeviceIsRefused) {
  fake::Driver d;
  fake::state.devices = 0;
  EXPECT_FALSE(srd_cuda_get()->usable);
  EXPECT_EQ("no CUDA device (the driver counts none)", reason());
}

TEST(CudaLoader, PointerDeviceIsAskedNeverAssumed) {
  fake::Driver d;
  static char gpu[2][4096];
  fake::state.devices = 3;
  for (int k : {1, 2}) {
    fake::state.mem_base[k] = (uintptr_t)gpu[k - 1];
    fake::state.mem_len[k] = sizeof(gpu[0]);
  }
  const srd_cuda *cu = srd_cuda_get();
  char err[256] = "";
  int dev = -1;
  ASSERT_EQ(0, srd_cuda_pointer_device(cu, gpu[0] + 100, &dev, err, sizeof(err))) << err;
  EXPECT_EQ(1, dev);
  ASSERT_EQ(0, srd_cuda_pointer_device(cu, gpu[1] + 100, &dev, err, sizeof(err))) << err;
  EXPECT_EQ(2, dev);
  int host = 0;
  EXPECT_EQ(-1, srd_cuda_pointer_device(cu, &host, &dev, err, sizeof(err)));
  EXPECT_NE(std::string::npos, std::string(err).find("is not CUDA memory")) << err;
}

TEST(CudaLoader, DmabufSupportPerDevice) {
  fake::Driver d;
  fake::state.dmabuf_attr[1] = 0;
  const srd_cuda *cu = srd_cuda_get();
  EXPECT_EQ(1, srd_cuda_dmabuf_supported(cu, 0));
  EXPECT_EQ(0, srd_cuda_dmabuf_supported(cu, 1));
  EXPECT_EQ(-1, srd_cuda_dmabuf_supported(cu, 5)); // no such device
}

TEST(CudaLoader, DmabufNeedsDriver117) {
  fake::Driver d;
  fake::state.driver_version = 11060;
  EXPECT_EQ(0, srd_cuda_dmabuf_supported(srd_cuda_get(), 0));
}

TEST(CudaLoader, DmabufFdCoversWholePages) {
  fake::Driver d;
  const srd_cuda *cu = srd_cuda_get();
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t base = 64 * page;
  int fd = -1;
  uint64_t off = 0;
  char err[256] = "";
  ASSERT_EQ(0, srd_cuda_dmabuf_fd(cu, (void *)(base + 100), page, &fd, &off, err, sizeof(err))) << err;
  EXPECT_EQ(42, fd);
  EXPECT_EQ(100u, off);
  EXPECT_EQ(base, (uintptr_t)fake::state.handle_ptr);
  EXPECT_EQ(2 * page, fake::state.handle_size); // 100 bytes into one page, a page long: two pages
  EXPECT_EQ(SRD_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, fake::state.handle_type);
  ASSERT_EQ(0, srd_cuda_dmabuf_fd(cu, (void *)base, page, &fd, &off, err, sizeof(err))) << err;
  EXPECT_EQ(0u, off);
  EXPECT_EQ(page, fake::state.handle_size);
}

TEST(CudaLoader, FlushTargetsTheOwner) {
  fake::Driver d;
  char err[256] = "";
  ASSERT_EQ(0, srd_cuda_flush_rdma_writes(srd_cuda_get(), err, sizeof(err))) << err;
  EXPECT_EQ(1, fake::state.flushes);
  EXPECT_EQ(SRD_CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX, fake::state.flush_target);
  EXPECT_EQ(SRD_CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER, fake::state.flush_scope);
}

TEST(CudaLoader, WritesOrdering) {
  fake::Driver d;
  fake::state.ordering_attr[0] = SRD_CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER;
  const srd_cuda *cu = srd_cuda_get();
  EXPECT_EQ(1, srd_cuda_rdma_writes_ordered(cu, 0));
  EXPECT_EQ(0, srd_cuda_rdma_writes_ordered(cu, 1));
}

// Every GPU answers for itself: the odd one out in any position is seen.
TEST(CudaLoader, EachGpuAnswersForItself) {
  fake::Driver d;
  fake::state.devices = 4;
  for (int odd = 0; odd < 4; odd++) {
    SCOPED_TRACE(odd);
    for (int k = 0; k < 4; k++) {
      fake::state.ordering_attr[k] = k == odd ? 0 : SRD_CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER;
      fake::state.dmabuf_attr[k] = k != odd;
    }
    const srd_cuda *cu = srd_cuda_get();
    for (int k = 0; k < 4; k++) {
      EXPECT_EQ(k != odd, srd_cuda_rdma_writes_ordered(cu, k)) << "GPU " << k;
      EXPECT_EQ(k != odd, srd_cuda_dmabuf_supported(cu, k)) << "GPU " << k;
    }
  }
}

// A stream that cannot be made gives its context back and says why; one
// that opens holds the device's primary context until it closes, and the
// caller's context is current again after each call.
srd_curesult refuse_stream(srd_custream *, unsigned) { return SRD_CUDA_ERROR_INVALID_VALUE; }

TEST(CudaStream, FailedOpenReleasesTheContext) {
  srd_cuda_ops o = fake::ops();
  o.stream_create = refuse_stream;
  fake::Driver d(o);
  srd_cuda_stream *s = nullptr;
  char err[256] = "";
  EXPECT_EQ(-1, srd_cuda_stream_open(srd_cuda_get(), 1, &s, err, sizeof err));
  EXPECT_EQ(nullptr, s);
  EXPECT_NE(nullptr, strstr(err, "cuStreamCreate")) << err;
  EXPECT_EQ(0, fake::state.retained[1]);
  EXPECT_EQ(nullptr, fake::state.current);
}

TEST(CudaStream, HoldsThePrimaryContextAndRestoresTheCallers) {
  fake::Driver d;
  srd_cucontext mine = reinterpret_cast<srd_cucontext>(0x77);
  fake::state.current = mine;
  srd_cuda_stream *s = nullptr;
  char err[256] = "";
  ASSERT_EQ(0, srd_cuda_stream_open(srd_cuda_get(), 1, &s, err, sizeof err)) << err;
  EXPECT_EQ(1, fake::state.retained[1]);
  uint64_t word = 0;
  fake::state.mem_base[1] = reinterpret_cast<uintptr_t>(&word);
  fake::state.mem_len[1] = sizeof word;
  ASSERT_EQ(0, srd_cuda_stream_write64(s, &word, 5, err, sizeof err)) << err;
  EXPECT_EQ(5u, word);
  ASSERT_EQ(1u, fake::state.calls.size());
  EXPECT_EQ(fake::primary(1), fake::state.calls[0].ctx) << "written under another context";
  EXPECT_EQ(mine, fake::state.current) << "the caller's context was not restored";
  srd_cuda_stream_close(s);
  EXPECT_EQ(0, fake::state.retained[1]);
  EXPECT_EQ(0, fake::state.streams_open);
  EXPECT_EQ(mine, fake::state.current);
}

} // namespace
