/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU regions end to end. The test process plays the client: it allocates
 * with the CUDA driver API (through cuda.c's table, so nothing else resolves
 * cu* symbols), exports VMM fds and legacy IPC handles, and hands them to a
 * real daemon, a separate process.
 *
 * The "gpu" cases carry the tag "cuda": they need a GPU and run on the GPU
 * machine (tests/gpu/README.md); `make check` elsewhere skips them by tag and
 * says so. The "cuda-2gpu" cases need two GPUs and print "SKIP" with the
 * device count on a machine with one. The "nodriver" cases run everywhere: without a driver the daemon
 * answers GPU imports with a named error and keeps serving host memory.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/gpu/cuda.h"
#include "proto/errors.h"
#include "proto/json.h"
#include "rdmamem.h"
#include "tests/testlib.h"

#if HAVE_CUDA_H
#include "daemon/gpu/cuda-ops.h"
#endif

static struct test_daemon td;

/* The cases count the daemon's context references exactly: none of them
 * is its own (test_context_kept_between_regions has those). */
static const char *const no_linger[] = { "--gpu-context-linger-sec=0", NULL };

static void setup(void)
{
	test_daemon_start(&td, no_linger);
}

static void teardown(void)
{
	test_daemon_stop(&td);
}

static cJSON *call_json(struct rdmamem_client *c, const char *method, const char *params)
{
	char *reply = NULL;
	cJSON *root;

	ck_assert_msg(rdmamem_call(c, method, params, NULL, 0, &reply, NULL, NULL) == 0, "%s: %s",
		      method, rdmamem_client_error_message(c));
	root = cJSON_Parse(reply);
	free(reply);
	return root;
}

/* What the daemon says when it cannot use a driver: a build without
 * cuda.h (no CUDA toolkit on the build machine) never can. */
#if HAVE_CUDA_H
#define NO_DRIVER_HINT "libcuda.so.1"
#else
#define NO_DRIVER_HINT "built without cuda.h"
#endif

static bool driver_present(void)
{
#if HAVE_CUDA_H
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
#else
	void *h = NULL;
#endif

	if (h)
		dlclose(h);
	return h != NULL;
}

/* Without a driver, GPU imports get a named error; host memory still works. */
START_TEST(test_gpu_import_without_driver)
{
	struct rdmamem_client *c = test_client(td.socket);
	uint8_t handle[RDMAMEM_CUDA_IPC_HANDLE_SIZE] = { 1, 2, 3 };
	uint64_t id;
	int fd;

	ck_assert_int_eq(rdmamem_memfd_create("x", 2 << 20, &fd, NULL), 0);
	if (driver_present()) {
		/* A memfd is no VMM export: the driver refuses it. */
		ck_assert_int_eq(rdmamem_register_cuda_vmm(c, fd, 2 << 20, 0, 0, &id), -EIO);
		ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_CUDA);
	} else {
		test_expect("gpu: GPU imports without a CUDA driver (two warnings)");
		ck_assert_int_eq(rdmamem_register_cuda_vmm(c, fd, 2 << 20, 0, 0, &id), -ENXIO);
		ck_assert_str_eq(rdmamem_client_error_name(c), RDMAMEM_ERROR_CUDA_UNAVAILABLE);
		ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), NO_DRIVER_HINT));
		ck_assert_int_eq(rdmamem_register_cuda_ipc(c, handle, 0, 0, 0, &id), -ENXIO);
	}
	/* Everything else goes on. */
	ck_assert_int_eq(rdmamem_register(c, fd, 0, 0, &id), 0);
	ck_assert_int_eq(rdmamem_write(c, id, 1, "ok", 2, RDMAMEM_LOCK_EXCLUSIVE, 0), 0);
	close(fd);
	rdmamem_client_close(c);
}
END_TEST

START_TEST(test_gpu_params)
{
	struct rdmamem_client *c = test_client(td.socket);
	char *reply = NULL;
	uint64_t id;
	int fd;

	ck_assert_int_eq(rdmamem_memfd_create("x", 4096, &fd, NULL), 0);
	/* VMM imports need the allocation's size; IPC handles no fd. */
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Register",
				      "{\"fd\":0,\"memory\":\"cuda-vmm\"}", &fd, 1, &reply, NULL,
				      NULL),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(reply, "\"parameter\":\"size\""));
	free(reply);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Register",
				      "{\"fd\":0,\"memory\":\"cuda-ipc\",\"ipc_handle\":\"00\"}",
				      &fd, 1, &reply, NULL, NULL),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(reply, "\"parameter\":\"fd\""));
	free(reply);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Register",
				      "{\"memory\":\"cuda-ipc\",\"ipc_handle\":\"0011\"}", NULL, 0,
				      &reply, NULL, NULL),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(reply, "\"parameter\":\"ipc_handle\""));
	free(reply);
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Register", "{\"memory\":\"gpu\"}", NULL, 0,
				      NULL, NULL, NULL),
			 -EINVAL);
	/* chunks: with cuda-vmm only, 1 to 64, each an fd the message carries. */
	{
		static const char *const bad[] = {
			"{\"fd\":0,\"memory\":\"cuda-vmm\",\"size\":\"2097152\",\"chunks\":2}",
			"{\"fd\":0,\"memory\":\"cuda-vmm\",\"size\":\"2097152\",\"chunks\":0}",
			"{\"fd\":0,\"memory\":\"cuda-vmm\",\"size\":\"2097152\",\"chunks\":65}",
			"{\"fd\":0,\"chunks\":2}",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Register", bad[i], &fd, 1,
						      &reply, NULL, NULL),
					 -EINVAL);
			ck_assert_msg(strstr(reply, "\"parameter\":\"chunks\""), "%s: %s", bad[i],
				      reply);
			free(reply);
		}
		ck_assert_int_eq(rdmamem_register_cuda_vmm_chunks(c, &fd, 0, 2 << 20, 0, 0, &id),
				 -EINVAL);
		ck_assert_int_eq(rdmamem_register_cuda_vmm_chunks(c, (int[]){ fd, -1 }, 2, 2 << 20,
								  0, 0, &id),
				 -EINVAL);
	}
	/* The range is checked before the driver is asked anything. */
	ck_assert_int_eq(rdmamem_call(c, "io.rdmamemd.Register",
				      "{\"fd\":0,\"memory\":\"cuda-vmm\",\"size\":\"2097152\","
				      "\"offset\":\"2097152\"}",
				      &fd, 1, NULL, NULL, NULL),
			 -ERANGE);
	close(fd);
	rdmamem_client_close(c);
}
END_TEST

/* The driver is loaded by the first GPU import, not at start. */
START_TEST(test_list_gpus_lazily)
{
	struct rdmamem_client *c = test_client(td.socket);
	cJSON *r = call_json(c, "io.rdmamemd.ListGpus", NULL), *driver;

	driver = cJSON_GetObjectItem(r, "driver");
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(driver, "loaded")));
	ck_assert_ptr_nonnull(strstr(cJSON_GetObjectItem(driver, "message")->valuestring,
				     "first GPU import"));
	ck_assert(cJSON_IsBool(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "peer_memory"),
						   "loaded")));
	cJSON_Delete(r);

	r = call_json(c, "io.rdmamemd.ListGpus", "{\"probe\":true}");
	driver = cJSON_GetObjectItem(r, "driver");
	if (driver_present()) {
		ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(driver, "loaded")));
	} else {
		ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(driver, "loaded")));
		ck_assert_ptr_nonnull(strstr(cJSON_GetObjectItem(driver, "message")->valuestring,
					     NO_DRIVER_HINT));
		ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r, "gpus")), 0);
	}
	cJSON_Delete(r);
	rdmamem_client_close(c);
}
END_TEST

#if HAVE_CUDA_H

/* The client's side of CUDA, in the test process. */
static const struct cu_ops *cu;
static CUcontext ctx;

#define CU_OK(call)                                                                   \
	do {                                                                          \
		CUresult _r = (call);                                                 \
		ck_assert_msg(_r == CUDA_SUCCESS, "%s: CUresult %d", #call, (int)_r); \
	} while (0)

static void gpu_setup(void)
{
	CUdevice dev;
	int r = cu_load();

	ck_assert_msg(r == 0, "no GPU here (%s): cases tagged cuda run on a GPU machine",
		      cu_last_error());
	cu = cu_get_ops();
	CU_OK(cu->cuDeviceGet(&dev, 0));
	CU_OK(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
	CU_OK(cu->cuCtxSetCurrent(ctx));
	setup();
}

/* Device 0's exportable memory, and read-write access to it. */
static const CUmemAllocationProp vmm_prop = {
	.type = CU_MEM_ALLOCATION_TYPE_PINNED,
	.location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
	.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
};
static const CUmemAccessDesc vmm_access = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
					    .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };

/* A VMM allocation of at least size bytes on device dev, mapped here for
 * that device, exported as an fd. */
static CUdeviceptr vmm_alloc_on(int dev, size_t size, size_t *ret_size, int *ret_fd)
{
	CUmemAllocationProp prop = vmm_prop;
	CUmemAccessDesc access = vmm_access;
	CUmemGenericAllocationHandle h;
	CUdeviceptr p;
	size_t gran;

	prop.location.id = dev;
	access.location.id = dev;
	CU_OK(cu->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	size = (size + gran - 1) / gran * gran;
	CU_OK(cu->cuMemCreate(&h, size, &prop, 0));
	CU_OK(cu->cuMemAddressReserve(&p, size, gran, 0, 0));
	CU_OK(cu->cuMemMap(p, size, 0, h, 0));
	CU_OK(cu->cuMemSetAccess(p, size, &access, 1));
	CU_OK(cu->cuMemExportToShareableHandle(ret_fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
					       0));
	*ret_size = size;
	return p;
}

static CUdeviceptr vmm_alloc(size_t size, size_t *ret_size, int *ret_fd)
{
	return vmm_alloc_on(0, size, ret_size, ret_fd);
}

static CUdeviceptr ipc_alloc(size_t size, uint8_t handle[RDMAMEM_CUDA_IPC_HANDLE_SIZE])
{
	CUipcMemHandle h;
	CUdeviceptr p;

	CU_OK(cu->cuMemAlloc(&p, size));
	CU_OK(cu->cuIpcGetMemHandle(&h, p));
	memcpy(handle, &h, RDMAMEM_CUDA_IPC_HANDLE_SIZE);
	return p;
}

static void fill(uint8_t *buf, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(i * 31 + seed + i / 251);
}

static void put(CUdeviceptr p, size_t off, size_t n, unsigned seed)
{
	uint8_t *buf = malloc(n);

	fill(buf, n, seed);
	CU_OK(cu->cuMemcpyHtoD(p + off, buf, n));
	free(buf);
}

/* Asserts device bytes [off, off + n) hold want[0..n). */
static void expect_bytes(CUdeviceptr p, size_t off, const uint8_t *want, size_t n)
{
	uint8_t *got = malloc(n);

	CU_OK(cu->cuMemcpyDtoH(got, p + off, n));
	ck_assert_msg(memcmp(got, want, n) == 0, "GPU bytes at %zu (+%zu) differ", off, n);
	free(got);
}

/* Asserts device bytes [off, off + n) hold the pattern of seed. */
static void expect(CUdeviceptr p, size_t off, size_t n, unsigned seed)
{
	/* calloc: gcc cannot tell that fill() writes every byte. */
	uint8_t *want = calloc(1, n);

	fill(want, n, seed);
	expect_bytes(p, off, want, n);
	free(want);
}

static cJSON *region_info(struct rdmamem_client *c, uint64_t id)
{
	char params[64];

	snprintf(params, sizeof(params), "{\"region\":\"%llu\"}", (unsigned long long)id);
	return call_json(c, "io.rdmamemd.GetRegion", params);
}

/* GetRegion's direct_access_{host,device}_bandwidth: present as asked, and
 * plausible (an H200 copies at 10 GB/s to a few TB/s). The host figure
 * comes from the measurement at start: polled. */
static void expect_bandwidth(struct rdmamem_client *c, uint64_t id, bool host, bool device)
{
	static const char *const names[] = { "direct_access_host_bandwidth",
					     "direct_access_device_bandwidth" };
	const bool want[] = { host, device };

	for (int k = 0; k < 2; k++) {
		cJSON *r = region_info(c, id);
		const cJSON *item = cJSON_GetObjectItemCaseSensitive(r, names[k]);
		uint64_t bps = 0;

		for (int i = 0; i < 100 && want[k] && !item; i++) {
			usleep(50 * 1000);
			cJSON_Delete(r);
			r = region_info(c, id);
			item = cJSON_GetObjectItemCaseSensitive(r, names[k]);
		}
		ck_assert_msg(!item == !want[k], "region %llu: %s %s", (unsigned long long)id,
			      names[k], item ? "present" : "absent");
		if (item) {
			ck_assert_int_eq(json_to_u64(item, &bps), 0);
			ck_assert_uint_gt(bps, 1000000000ULL);
			ck_assert_uint_lt(bps, 100000000000000ULL);
			printf("region %llu: %s %" PRIu64 " MB/s\n", (unsigned long long)id,
			       names[k], bps / 1000000);
		}
		cJSON_Delete(r);
	}
}

/* A VMM import: its pointer has no context in the daemon, which copies
 * under the device's primary context. Byte-exact at odd offsets. */
START_TEST(test_vmm_read_write)
{
	struct rdmamem_client *c = test_client(td.socket);
	uint8_t *buf = malloc(1 << 20), *want = malloc(1 << 20);
	size_t size;
	uint64_t id, sub;
	int fd;
	CUdeviceptr p = vmm_alloc(4 << 20, &size, &fd);
	cJSON *info, *loc;

	ck_assert_int_eq(rdmamem_register_cuda_vmm(c, fd, size, 0, 0, &id), 0);
	close(fd);
	info = region_info(c, id);
	loc = cJSON_GetObjectItem(info, "location");
	ck_assert_str_eq(cJSON_GetObjectItem(loc, "type")->valuestring, "gpu");
	ck_assert_int_eq(cJSON_GetObjectItem(loc, "device")->valueint, 0);
	ck_assert_int_gt(strlen(cJSON_GetObjectItem(loc, "pci_bus_id")->valuestring), 6);
	ck_assert_str_eq(
		cJSON_GetObjectItem(cJSON_GetObjectItem(info, "source"), "type")->valuestring,
		"cuda-vmm");
	cJSON_Delete(info);

	/* The daemon writes, the client's own mapping sees it. */
	fill(buf, 777777, 5);
	ck_assert_int_eq(rdmamem_write(c, id, 12345, buf, 777777, RDMAMEM_LOCK_EXCLUSIVE, 0), 0);
	expect(p, 12345, 777777, 5);
	/* The client writes, the daemon reads it back. */
	put(p, 3 << 20, 99999, 9);
	ck_assert_int_eq(rdmamem_read(c, id, 3 << 20, buf, 99999, 0), 0);
	fill(want, 99999, 9);
	ck_assert_int_eq(memcmp(buf, want, 99999), 0);

	/* A sub-range of an allocation at an odd offset is a region too. */
	{
		int fd2;
		size_t size2;
		CUdeviceptr q = vmm_alloc(2 << 20, &size2, &fd2);

		ck_assert_int_eq(rdmamem_register_cuda_vmm(c, fd2, size2, 4097, 1000, &sub), 0);
		close(fd2);
		ck_assert_int_eq(rdmamem_write(c, sub, 0, "edge", 4, RDMAMEM_LOCK_EXCLUSIVE, 0), 0);
		ck_assert_int_eq(rdmamem_write(c, sub, 997, "end", 3, RDMAMEM_LOCK_EXCLUSIVE, 0),
				 0);
		ck_assert_int_eq(rdmamem_write(c, sub, 998, "end", 3, RDMAMEM_LOCK_EXCLUSIVE, 0),
				 -ERANGE);
		CU_OK(cu->cuMemcpyDtoH(buf, q + 4097, 4));
		ck_assert_int_eq(memcmp(buf, "edge", 4), 0);
		CU_OK(cu->cuMemcpyDtoH(buf, q + 4097 + 997, 3));
		ck_assert_int_eq(memcmp(buf, "end", 3), 0);
	}
	free(buf);
	free(want);
	rdmamem_client_close(c);
}
END_TEST

/* Three allocations mapped one after the other here, as PyTorch's
 * expandable segments map theirs: one region over all three, byte-exact
 * across both seams, in both directions. */
START_TEST(test_vmm_chunks)
{
	struct rdmamem_client *c = test_client(td.socket);
	CUmemGenericAllocationHandle h[3];
	size_t gran, n;
	uint64_t id;
	CUdeviceptr p;
	uint8_t *buf, *want;
	cJSON *info, *src;
	int fds[3];

	CU_OK(cu->cuMemGetAllocationGranularity(&gran, &vmm_prop,
						CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CU_OK(cu->cuMemAddressReserve(&p, 3 * gran, gran, 0, 0));
	for (int i = 0; i < 3; i++) {
		CU_OK(cu->cuMemCreate(&h[i], gran, &vmm_prop, 0));
		CU_OK(cu->cuMemMap(p + i * gran, gran, 0, h[i], 0));
		CU_OK(cu->cuMemSetAccess(p + i * gran, gran, &vmm_access, 1));
		CU_OK(cu->cuMemExportToShareableHandle(&fds[i], h[i],
						       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
						       0));
	}
	/* From 1000 bytes before the first seam to 2000 after the second. */
	n = gran + 3000;
	ck_assert_int_eq(rdmamem_register_cuda_vmm_chunks(c, fds, 3, gran, gran - 1000, n, &id), 0);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	info = region_info(c, id);
	src = cJSON_GetObjectItem(info, "source");
	ck_assert_int_eq(cJSON_GetObjectItem(src, "chunks")->valueint, 3);
	cJSON_Delete(info);

	buf = malloc(n);
	want = malloc(n);
	fill(buf, n, 11);
	ck_assert_int_eq(rdmamem_write(c, id, 0, buf, n, RDMAMEM_LOCK_EXCLUSIVE, 0), 0);
	expect(p, gran - 1000, n, 11);
	put(p, gran - 1000, n, 12);
	ck_assert_int_eq(rdmamem_read(c, id, 0, buf, n, 0), 0);
	fill(want, n, 12);
	ck_assert_int_eq(memcmp(buf, want, n), 0);
	ck_assert_int_eq(rdmamem_unregister(c, id), 0);
	free(buf);
	free(want);
	rdmamem_client_close(c);
	for (int i = 0; i < 3; i++) {
		CU_OK(cu->cuMemUnmap(p + i * gran, gran));
		CU_OK(cu->cuMemRelease(h[i]));
	}
	CU_OK(cu->cuMemAddressFree(p, 3 * gran));
}
END_TEST

/* A legacy handle registered twice: one open, shared; byte-exact. */
START_TEST(test_ipc_twice)
{
	struct rdmamem_client *c = test_client(td.socket);
	uint8_t handle[RDMAMEM_CUDA_IPC_HANDLE_SIZE], buf[64];
	CUdeviceptr p = ipc_alloc(1 << 20, handle);
	uint64_t a, b;
	cJSON *info;

	put(p, 0, 1 << 20, 3);
	ck_assert_int_eq(rdmamem_register_cuda_ipc(c, handle, 0, 0, 0, &a), 0);
	ck_assert_int_eq(rdmamem_register_cuda_ipc(c, handle, 0, 4099, 333, &b), 0);
	info = region_info(c, b);
	ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(info, "source"),
					     "regions_sharing_the_open")
				 ->valueint,
			 2);
	ck_assert_str_eq(cJSON_GetObjectItem(info, "size")->valuestring, "333");
	cJSON_Delete(info);

	ck_assert_int_eq(rdmamem_read(c, b, 0, buf, 64, 0), 0);
	{
		uint8_t want[1 << 13];

		fill(want, sizeof(want), 3);
		ck_assert_int_eq(memcmp(buf, want + 4099, 64), 0);
	}
	ck_assert_int_eq(rdmamem_write(c, a, 4099, "via a", 5, RDMAMEM_LOCK_EXCLUSIVE, 0), 0);
	ck_assert_int_eq(rdmamem_read(c, b, 0, buf, 5, 0), 0);
	ck_assert_int_eq(memcmp(buf, "via a", 5), 0);
	ck_assert_int_eq(rdmamem_register_cuda_ipc(c, handle, 0, 1 << 20, 1, &b), -ERANGE);

	/* Both go, the open goes; a new registration opens it again. */
	ck_assert_int_eq(rdmamem_unregister(c, a), 0);
	ck_assert_int_eq(rdmamem_unregister(c, b), 0);
	ck_assert_int_eq(rdmamem_register_cuda_ipc(c, handle, 0, 0, 0, &a), 0);
	ck_assert_int_eq(rdmamem_read(c, a, 4099, buf, 5, 0), 0);
	ck_assert_int_eq(memcmp(buf, "via a", 5), 0);
	rdmamem_client_close(c);
}
END_TEST

/* Copy in every direction, sub-ranges at odd offsets. */
START_TEST(test_copy_directions)
{
	struct rdmamem_client *c = test_client(td.socket);
	uint8_t handle[RDMAMEM_CUDA_IPC_HANDLE_SIZE], *host, *want = malloc(8 << 20);
	size_t vsize;
	uint64_t h, v, i;
	int vfd, hfd;
	CUdeviceptr vp = vmm_alloc(8 << 20, &vsize, &vfd);
	CUdeviceptr ip = ipc_alloc(8 << 20, handle);
	struct rdmamem_copy cp = { .mode = RDMAMEM_LOCK_EXCLUSIVE };

	ck_assert_int_eq(rdmamem_memfd_create("host", 8 << 20, &hfd, (void **)&host), 0);
	fill(host, 8 << 20, 11);
	ck_assert_int_eq(rdmamem_register(c, hfd, 0, 0, &h), 0);
	ck_assert_int_eq(rdmamem_register_cuda_vmm(c, vfd, vsize, 0, 0, &v), 0);
	ck_assert_int_eq(rdmamem_register_cuda_ipc(c, handle, 0, 0, 0, &i), 0);

	/* host → VMM */
	cp = (struct rdmamem_copy){ .from_region = h,
				    .from_offset = 3,
				    .to_region = v,
				    .to_offset = 1001,
				    .length = (5 << 20) + 7,
				    .mode = RDMAMEM_LOCK_EXCLUSIVE };
	ck_assert_int_eq(rdmamem_copy(c, &cp), 0);
	expect_bytes(vp, 1001, host + 3, (5 << 20) + 7);
	/* VMM → IPC (GPU to GPU) */
	cp = (struct rdmamem_copy){ .from_region = v,
				    .from_offset = 1001,
				    .to_region = i,
				    .to_offset = 17,
				    .length = 4 << 20,
				    .mode = RDMAMEM_LOCK_EXCLUSIVE };
	ck_assert_int_eq(rdmamem_copy(c, &cp), 0);
	expect_bytes(ip, 17, host + 3, 4 << 20);
	/* IPC → host, then host → host */
	memset(host, 0, 8 << 20);
	cp = (struct rdmamem_copy){ .from_region = i,
				    .from_offset = 17,
				    .to_region = h,
				    .to_offset = 5,
				    .length = 3 << 20,
				    .mode = RDMAMEM_LOCK_EXCLUSIVE };
	ck_assert_int_eq(rdmamem_copy(c, &cp), 0);
	fill(want, 8 << 20, 11);
	ck_assert_int_eq(memcmp(host + 5, want + 3, 3 << 20), 0);
	cp = (struct rdmamem_copy){ .from_region = h,
				    .from_offset = 5,
				    .to_region = h,
				    .to_offset = (4 << 20) + 1,
				    .length = 1 << 20,
				    .mode = RDMAMEM_LOCK_EXCLUSIVE };
	ck_assert_int_eq(rdmamem_copy(c, &cp), 0);
	ck_assert_int_eq(memcmp(host + (4 << 20) + 1, want + 3, 1 << 20), 0);
	/* host → VMM again, the host region page-locked now: a copy this
	 * long is queued from the loop and waited for on the pool (as the
	 * IPC → host one above), and answered once its bytes are there. */
	fill(host, 8 << 20, 29);
	cp = (struct rdmamem_copy){ .from_region = h,
				    .from_offset = 4096,
				    .to_region = v,
				    .to_offset = 2,
				    .length = 6 << 20,
				    .mode = RDMAMEM_LOCK_EXCLUSIVE };
	ck_assert_int_eq(rdmamem_copy(c, &cp), 0);
	expect_bytes(vp, 2, host + 4096, 6 << 20);

	/* Out of range on the GPU side is refused like anywhere else. */
	cp = (struct rdmamem_copy){ .from_region = h,
				    .to_region = i,
				    .to_offset = 8 << 20,
				    .length = 1,
				    .mode = RDMAMEM_LOCK_EXCLUSIVE };
	ck_assert_int_eq(rdmamem_copy(c, &cp), -ERANGE);

	/* Measured bandwidths: the GPU's device-to-device rate for GPU memory
	 * (no host figure: the CPU cannot load it), and host-to-device for the
	 * host region, page-locked on the GPU by the copies above. */
	expect_bandwidth(c, v, false, true);
	expect_bandwidth(c, i, false, true);
	expect_bandwidth(c, h, true, true);
	close(hfd);
	close(vfd);
	free(want);
	rdmamem_client_close(c);
}
END_TEST

/*
 * Copies whose ranges share device memory end as memmove() would leave it:
 * within one region (IPC and VMM) and between two regions over one IPC
 * open. cuMemcpy promises nothing for overlapping ranges: a 1-byte shift
 * within one region came out wrong through cuMemcpyDtoD on an H200.
 */
#define OVL_SIZE (8U << 20)

struct ovl_copy {
	int from, to; /* index into the regions */
	uint64_t from_off, to_off, length;
};

static void overlap_copies(struct rdmamem_client *c, const uint64_t *ids, const uint64_t *base,
			   CUdeviceptr p, const struct ovl_copy *copies, size_t n)
{
	uint8_t *shadow = malloc(OVL_SIZE), *got = malloc(OVL_SIZE);

	fill(shadow, OVL_SIZE, 21);
	put(p, 0, OVL_SIZE, 21);
	for (size_t k = 0; k < n; k++) {
		struct rdmamem_copy cp = { .from_region = ids[copies[k].from],
					   .from_offset = copies[k].from_off,
					   .to_region = ids[copies[k].to],
					   .to_offset = copies[k].to_off,
					   .length = copies[k].length,
					   .mode = RDMAMEM_LOCK_EXCLUSIVE };

		memmove(shadow + base[copies[k].to] + copies[k].to_off,
			shadow + base[copies[k].from] + copies[k].from_off, copies[k].length);
		ck_assert_int_eq(rdmamem_copy(c, &cp), 0);
		CU_OK(cu->cuMemcpyDtoH(got, p, OVL_SIZE));
		ck_assert_msg(memcmp(got, shadow, OVL_SIZE) == 0,
			      "copy %zu (%llu bytes from %llu to %llu) differs from memmove", k,
			      (unsigned long long)copies[k].length,
			      (unsigned long long)(base[copies[k].from] + copies[k].from_off),
			      (unsigned long long)(base[copies[k].to] + copies[k].to_off));
	}
	free(shadow);
	free(got);
}

START_TEST(test_copy_overlapping_gpu)
{
	static const struct ovl_copy copies[] = {
		/* Within one region: a byte, a page and 3 MiB apart, both ways. */
		{ 0, 0, 100, 101, 2U << 20 },
		{ 0, 0, (1U << 20) + 4097, 1U << 20, 3U << 20 },
		{ 0, 0, 1U << 20, 4U << 20, 4U << 20 },
		{ 0, 0, 5U << 20, 2U << 20, 3U << 20 },
		/* Between two views: the second starts 1 MiB + 3 in. */
		{ 0, 1, 0, 0, 5U << 20 },
		{ 1, 0, 0, 0, 5U << 20 },
		{ 0, 1, (1U << 20) + 3, 4096, 6U << 20 },
		{ 1, 0, 4096, (1U << 20) + 3 + 4096 + 7, 6U << 20 },
		/* The same bytes onto themselves. */
		{ 1, 0, 0, (1U << 20) + 3, 1U << 20 },
	};
	struct rdmamem_client *c = test_client(td.socket);
	uint8_t handle[RDMAMEM_CUDA_IPC_HANDLE_SIZE];
	uint64_t ids[2], base[2] = { 0, (1U << 20) + 3 };
	CUdeviceptr ip = ipc_alloc(OVL_SIZE, handle), vp;
	size_t vsize;
	int vfd;

	/* Two regions over one IPC open. */
	ck_assert_int_eq(rdmamem_register_cuda_ipc(c, handle, 0, 0, 0, &ids[0]), 0);
	ck_assert_int_eq(rdmamem_register_cuda_ipc(c, handle, 0, base[1], 0, &ids[1]), 0);
	overlap_copies(c, ids, base, ip, copies, ELEMENTSOF(copies));

	/* Within one VMM region (the first four copies). */
	vp = vmm_alloc(OVL_SIZE, &vsize, &vfd);
	ck_assert_uint_eq(vsize, OVL_SIZE);
	ck_assert_int_eq(rdmamem_register_cuda_vmm(c, vfd, vsize, 0, 0, &ids[0]), 0);
	close(vfd);
	overlap_copies(c, ids, base, vp, copies, 4);
	rdmamem_client_close(c);
}
END_TEST

/* Registering GPU memory on an RDMA device with none open: a failure that
 * says so, answered each time and kept nowhere. */
START_TEST(test_gpu_registration_without_rdma)
{
	struct rdmamem_client *c = test_client(td.socket);
	struct rdmamem_registration reg;
	size_t size;
	uint64_t id;
	int fd;

	vmm_alloc(2 << 20, &size, &fd);
	ck_assert_int_eq(rdmamem_register_cuda_vmm(c, fd, size, 0, 0, &id), 0);
	close(fd);
	ck_assert_int_eq(rdmamem_register_on(c, id, "mlx5_0", &reg), -ENODEV);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "no RDMA device 'mlx5_0'"));
	ck_assert_int_eq(rdmamem_register_on(c, id, "mlx5_0", &reg), -ENODEV);
	ck_assert_ptr_nonnull(strstr(rdmamem_client_error_message(c), "no RDMA device 'mlx5_0'"));
	ck_assert_ptr_null(strstr(rdmamem_client_error_message(c), "not retried"));
	rdmamem_client_close(c);
}
END_TEST

static bool nothing_left(void)
{
	struct rdmamem_client *c = test_client(td.socket);
	cJSON *r = call_json(c, "io.rdmamemd.ListGpus", "{\"probe\":true}"), *g;
	bool clean = true;

	cJSON_ArrayForEach(g, cJSON_GetObjectItem(r, "gpus"))
		clean = clean && cJSON_GetObjectItem(g, "primary_context_refs")->valueint == 0 &&
			cJSON_GetObjectItem(g, "regions")->valueint == 0;
	cJSON_Delete(r);
	rdmamem_client_close(c);
	return clean;
}

/* A client in a child process that starts CUDA itself, imports a VMM
 * allocation, lets it go and leaves: afterwards the daemon holds the driver
 * (its device files stay open for the daemon's life) but no import. */
static void warm_up_driver(void)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rdmamem_client *c = test_client(td.socket);
		CUdevice dev;
		size_t size;
		uint64_t id;
		int fd;

		if (cu_load() < 0)
			_exit(3);
		cu = cu_get_ops();
		CU_OK(cu->cuDeviceGet(&dev, 0));
		CU_OK(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
		CU_OK(cu->cuCtxSetCurrent(ctx));
		vmm_alloc(2 << 20, &size, &fd);
		if (rdmamem_register_cuda_vmm(c, fd, size, 0, 0, &id) < 0 ||
		    rdmamem_unregister(c, id) < 0)
			_exit(4);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* VMM and IPC regions, a host one and a lease, and a large GPU → host copy
 * in flight. */
static int gpu_client(const char *socket, void *arg)
{
	struct rdmamem_client *c = test_client(socket);
	uint8_t handle[RDMAMEM_CUDA_IPC_HANDLE_SIZE];
	size_t size;
	uint64_t v, i, h, lease;
	int fd, hfd;
	char msg[256];
	int raw;
	CUdevice dev;

	(void)arg;
	if (cu_load() < 0)
		return 3;
	cu = cu_get_ops();
	CU_OK(cu->cuDeviceGet(&dev, 0));
	CU_OK(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
	CU_OK(cu->cuCtxSetCurrent(ctx));
	vmm_alloc(256 << 20, &size, &fd);
	ipc_alloc(64 << 20, handle);
	if (rdmamem_register_cuda_vmm(c, fd, size, 0, 0, &v) < 0 ||
	    rdmamem_register_cuda_ipc(c, handle, 0, 0, 0, &i) < 0 ||
	    rdmamem_memfd_create("h", 256 << 20, &hfd, NULL) < 0 ||
	    rdmamem_register(c, hfd, 0, 0, &h) < 0 ||
	    rdmamem_lock(c, i, RDMAMEM_LOCK_SHARED, -1, &lease) < 0)
		return 1;
	/* A big GPU → host copy in flight, raw so we do not wait. */
	raw = test_connect(socket);
	snprintf(msg, sizeof(msg),
		 "{\"method\":\"io.rdmamemd.Copy\",\"parameters\":{\"from\":{\"region\":"
		 "\"%llu\"},\"to\":{\"region\":\"%llu\"},\"length\":\"268435456\"}}",
		 (unsigned long long)v, (unsigned long long)h);
	test_send_msg(raw, msg, NULL, 0);
	return 0;
}

/* A client dies while its GPU regions are in use: no context, mapping or
 * handle is left behind once all clients are gone. The client is a child
 * that starts CUDA itself: CUDA does not survive fork(), so this case's
 * fixture leaves CUDA alone in the test process. */
START_TEST(test_client_exit_while_in_use)
{
	struct test_baseline base = {
		.settled = nothing_left,
		.timeout_ms = 10000,
		.what = "no context, mapping or region left on the GPUs",
	};

	warm_up_driver();
	for (int k = 0; k < 500 && !nothing_left(); k++)
		usleep(20000);
	test_assert_serving(td.socket);
	test_baseline_take(&td, &base);
	test_kill_client_mid_call(&td, &base, gpu_client, NULL, 20000);
}
END_TEST

/* ---- two GPUs ---- */

/* The client's contexts, one per GPU. */
static CUcontext ctxs[2];

/* Whether this machine has two GPUs; prints why the case is skipped if not. */
static bool two_gpus_or_skip(const char *test)
{
	size_t n = strlen(test);
	int count = cu_device_count();

	if (count >= 2)
		return true;
	/* __func__ of a START_TEST case is its name with "_fn" appended. */
	if (n > 3 && strcmp(test + n - 3, "_fn") == 0)
		n -= 3;
	printf("SKIP %.*s: needs two GPUs, this machine has %d (%s)\n", (int)n, test, count,
	       count < 0 ? cu_last_error() : "cuDeviceGetCount");
	return false;
}

static void gpu2_setup(void)
{
	gpu_setup();
	ctxs[0] = ctx;
	if (cu_device_count() >= 2) {
		CUdevice dev;

		CU_OK(cu->cuDeviceGet(&dev, 1));
		CU_OK(cu->cuDevicePrimaryCtxRetain(&ctxs[1], dev));
	}
}

/* The client's own copies run in the context of the memory's device. */
static void put_on(int dev, CUdeviceptr p, size_t off, size_t n, unsigned seed)
{
	CU_OK(cu->cuCtxSetCurrent(ctxs[dev]));
	put(p, off, n, seed);
	CU_OK(cu->cuCtxSetCurrent(ctxs[0]));
}

static void expect_on(int dev, CUdeviceptr p, size_t off, size_t n, unsigned seed)
{
	CU_OK(cu->cuCtxSetCurrent(ctxs[dev]));
	expect(p, off, n, seed);
	CU_OK(cu->cuCtxSetCurrent(ctxs[0]));
}

static CUdeviceptr ipc_alloc_on(int dev, size_t size, uint8_t handle[RDMAMEM_CUDA_IPC_HANDLE_SIZE])
{
	CUdeviceptr p;

	CU_OK(cu->cuCtxSetCurrent(ctxs[dev]));
	p = ipc_alloc(size, handle);
	CU_OK(cu->cuCtxSetCurrent(ctxs[0]));
	return p;
}

/* cuDeviceCanAccessPeer(a, b), printed: the topology the case ran on. */
static bool can_access_peer(int a, int b)
{
	CUdevice da, db;
	int can = 0;

	CU_OK(cu->cuDeviceGet(&da, a));
	CU_OK(cu->cuDeviceGet(&db, b));
	CU_OK(cu->cuDeviceCanAccessPeer(&can, da, db));
	printf("cuDeviceCanAccessPeer(GPU %d, GPU %d) = %d\n", a, b, can);
	return can;
}

static cJSON *list_gpus(struct rdmamem_client *c)
{
	return call_json(c, "io.rdmamemd.ListGpus", "{\"probe\":true}");
}

static cJSON *gpu_of(cJSON *list, int ordinal)
{
	cJSON *g;

	cJSON_ArrayForEach(g, cJSON_GetObjectItem(list, "gpus"))
		if (cJSON_GetObjectItem(g, "ordinal")->valueint == ordinal)
			return g;
	ck_abort_msg("ListGpus has no GPU %d", ordinal);
	return NULL;
}

static cJSON *peer_of(cJSON *gpu, int ordinal)
{
	cJSON *p;

	cJSON_ArrayForEach(p, cJSON_GetObjectItem(gpu, "peers"))
		if (cJSON_GetObjectItem(p, "ordinal")->valueint == ordinal)
			return p;
	ck_abort_msg("GPU %d lists no peer %d", cJSON_GetObjectItem(gpu, "ordinal")->valueint,
		     ordinal);
	return NULL;
}

static uint64_t u64_of(cJSON *o, const char *name)
{
	uint64_t v = 0;

	ck_assert_int_eq(json_to_u64(cJSON_GetObjectItem(o, name), &v), 0);
	return v;
}

static int refs_of(struct rdmamem_client *c, int ordinal)
{
	cJSON *r = list_gpus(c);
	int n = cJSON_GetObjectItem(gpu_of(r, ordinal), "primary_context_refs")->valueint;

	cJSON_Delete(r);
	return n;
}

/* Polls ListGpus until GPU ordinal's context references are want: an IPC
 * open is closed on the pool after its last region goes. */
static void expect_refs(struct rdmamem_client *c, int ordinal, int want)
{
	int got = refs_of(c, ordinal);

	for (int i = 0; i < 250 && got != want; i++) {
		usleep(20000);
		got = refs_of(c, ordinal);
	}
	ck_assert_msg(got == want, "GPU %d: %d primary context references, expected %d", ordinal,
		      got, want);
	printf("GPU %d: %d primary context references\n", ordinal, got);
}

/* Prints ListGpus' view of the pair, checks the path the daemon says it
 * takes, and returns the copies from a to b on that path. */
static uint64_t pair_copies(struct rdmamem_client *c, int a, int b, const char *want_path)
{
	cJSON *r = list_gpus(c), *p = peer_of(gpu_of(r, a), b);
	const char *path = cJSON_GetObjectItem(p, "copy_path")->valuestring;
	uint64_t peer = u64_of(p, "peer_copies"), staged = u64_of(p, "staged_copies");
	cJSON *rank = cJSON_GetObjectItem(p, "performance_rank");

	printf("ListGpus: GPU %d -> GPU %d: access %s, performance rank %d, copy_path %s, "
	       "%" PRIu64 " peer and %" PRIu64 " staged copies\n",
	       a, b, cJSON_IsTrue(cJSON_GetObjectItem(p, "access")) ? "yes" : "no",
	       cJSON_IsNumber(rank) ? rank->valueint : -1, path, peer, staged);
	ck_assert_str_eq(path, want_path);
	/* The other path was never taken. */
	ck_assert_uint_eq(strcmp(path, "peer") == 0 ? staged : peer, 0);
	cJSON_Delete(r);
	return strcmp(path, "peer") == 0 ? peer : staged;
}

#define X2_SIZE (8U << 20)
#define X2_LEN ((5U << 20) + 7)

struct x2_copy {
	int from, to; /* index into the regions */
	uint64_t from_off, to_off;
};

/*
 * VMM and IPC allocations on GPU 0 and GPU 1, registered by one client;
 * a pattern copied from one to the next around all of them, GPU 0 -> 1 and
 * back at odd offsets, each arrival checked byte for byte in the client's
 * own mapping. An IPC allocation of GPU 1 opened in GPU 0's context (where
 * peer access allows it) takes part too. ListGpus then says which path the
 * copies took, and the primary context references of each GPU drop to 0
 * with its last import. want_path: what the daemon must report.
 */
static void two_gpu_round(const char *want_path)
{
	struct rdmamem_client *c = test_client(td.socket);
	uint8_t h[3][RDMAMEM_CUDA_IPC_HANDLE_SIZE];
	bool can01 = can_access_peer(0, 1), can10 = can_access_peer(1, 0);
	/* Forced staging leaves it out: the IPC open enables peer access
	 * itself (CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), which staging does
	 * not mean to use. */
	bool cross = !want_path;
	/* v0, v1, i0, i1, x (GPU 1's memory opened from GPU 0) */
	CUdeviceptr p[5];
	int dev[5] = { 0, 1, 0, 1, 1 }, ctx_dev[5] = { 0, 1, 0, 1, 0 };
	uint64_t id[5], before01, before10, n01 = 0, n10 = 0;
	size_t size;
	int fd, n_regions = 4;
	static const struct x2_copy copies[] = {
		{ 0, 1, 1001, 3 },     /* v0 -> v1 */
		{ 1, 2, 3, 4097 },     /* v1 -> i0 */
		{ 2, 3, 4097, 17 },    /* i0 -> i1 */
		{ 3, 0, 17, 65537 },   /* i1 -> v0 */
		{ 1, 4, 3, 99 },       /* v1 -> x: one GPU's memory, two contexts */
		{ 4, 3, 99, 1 << 20 }, /* x -> i1 */
	};

	if (!want_path)
		want_path = can01 && can10 ? "peer" : "staged";
	printf("two GPUs: the daemon should copy between them %s\n", want_path);
	p[0] = vmm_alloc_on(0, X2_SIZE, &size, &fd);
	ck_assert_int_eq(rdmamem_register_cuda_vmm(c, fd, size, 0, 0, &id[0]), 0);
	close(fd);
	p[1] = vmm_alloc_on(1, X2_SIZE, &size, &fd);
	ck_assert_int_eq(rdmamem_register_cuda_vmm(c, fd, size, 0, 0, &id[1]), 0);
	close(fd);
	p[2] = ipc_alloc_on(0, X2_SIZE, h[0]);
	ck_assert_int_eq(rdmamem_register_cuda_ipc(c, h[0], 0, 0, 0, &id[2]), 0);
	p[3] = ipc_alloc_on(1, X2_SIZE, h[1]);
	ck_assert_int_eq(rdmamem_register_cuda_ipc(c, h[1], 1, 0, 0, &id[3]), 0);
	p[4] = ipc_alloc_on(1, X2_SIZE, h[2]);
	/* GPU 1's memory opened in GPU 0's context: GPU 0 reaches it through
	 * peer access; without, the driver may refuse the open. */
	if (cross) {
		int r = rdmamem_register_cuda_ipc(c, h[2], 0, 0, 0, &id[4]);

		printf("IPC handle of GPU 1 opened in GPU 0's context: %s\n",
		       r == 0 ? "ok" : rdmamem_client_error_message(c));
		if (can01)
			ck_assert_int_eq(r, 0);
		n_regions = r == 0 ? 5 : 4;
	}
	for (int k = 0; k < n_regions; k++) {
		cJSON *info = region_info(c, id[k]);

		ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(info, "location"),
						     "device")
					 ->valueint,
				 dev[k]);
		cJSON_Delete(info);
	}
	expect_refs(c, 0, n_regions == 5 ? 3 : 2);
	expect_refs(c, 1, 2);

	before01 = pair_copies(c, 0, 1, want_path);
	before10 = pair_copies(c, 1, 0, want_path);
	put_on(0, p[0], 1001, X2_LEN, 41);
	for (size_t k = 0; k < ELEMENTSOF(copies); k++) {
		const struct x2_copy *x = &copies[k];
		struct rdmamem_copy cp = { .from_region = id[x->from],
					   .from_offset = x->from_off,
					   .to_region = id[x->to],
					   .to_offset = x->to_off,
					   .length = X2_LEN,
					   .mode = RDMAMEM_LOCK_EXCLUSIVE };

		if (x->from >= n_regions || x->to >= n_regions)
			continue;
		ck_assert_msg(rdmamem_copy(c, &cp) == 0, "copy %zu: %s", k,
			      rdmamem_client_error_message(c));
		expect_on(dev[x->to], p[x->to], x->to_off, X2_LEN, 41);
		if (ctx_dev[x->from] == 0 && ctx_dev[x->to] == 1)
			n01++;
		else if (ctx_dev[x->from] == 1 && ctx_dev[x->to] == 0)
			n10++;
	}
	ck_assert_uint_eq(pair_copies(c, 0, 1, want_path) - before01, n01);
	ck_assert_uint_eq(pair_copies(c, 1, 0, want_path) - before10, n10);

	/* Each GPU's context goes with its last import. */
	ck_assert_int_eq(rdmamem_unregister(c, id[0]), 0);
	ck_assert_int_eq(rdmamem_unregister(c, id[2]), 0);
	expect_refs(c, 0, n_regions == 5 ? 1 : 0);
	expect_refs(c, 1, 2);
	if (n_regions == 5)
		ck_assert_int_eq(rdmamem_unregister(c, id[4]), 0);
	expect_refs(c, 0, 0);
	ck_assert_int_eq(rdmamem_unregister(c, id[1]), 0);
	expect_refs(c, 1, 1);
	ck_assert_int_eq(rdmamem_unregister(c, id[3]), 0);
	expect_refs(c, 1, 0);
	rdmamem_client_close(c);
}

START_TEST(test_two_gpus_copies)
{
	if (!two_gpus_or_skip(__func__))
		return;
	two_gpu_round(NULL);
}
END_TEST

/* RDMAMEMD_CUDA_PEER_COPIES=off: the same copies, staged through host
 * memory by the driver whatever the topology (the path machines without
 * peer access take). */
START_TEST(test_two_gpus_copies_staged)
{
	if (!two_gpus_or_skip(__func__))
		return;
	test_daemon_stop(&td);
	ck_assert_int_eq(setenv("RDMAMEMD_CUDA_PEER_COPIES", "off", 1), 0);
	test_daemon_start(&td, no_linger);
	unsetenv("RDMAMEMD_CUDA_PEER_COPIES");
	two_gpu_round("staged");
}
END_TEST

/* One connection per GPU, each on its own thread, copying at once. */
struct x2_thread {
	int own, other; /* GPU ordinals */
	int fd_own, fd_other;
	size_t size;
	unsigned seed;
	char failure[256];
};

static void *x2_thread(void *arg)
{
	struct x2_thread *t = arg;
	struct rdmamem_client *c = test_client(td.socket);
	size_t n = (1U << 20) + 333;
	uint8_t *in = malloc(n), *out = malloc(n);
	uint64_t a, b;

	if (rdmamem_register_cuda_vmm(c, t->fd_own, t->size, 0, 0, &a) < 0 ||
	    rdmamem_register_cuda_vmm(c, t->fd_other, t->size, 0, 0, &b) < 0) {
		snprintf(t->failure, sizeof(t->failure), "register: %s",
			 rdmamem_client_error_message(c));
		goto out;
	}
	for (unsigned k = 0; k < 40 && !t->failure[0]; k++) {
		uint64_t at = 1 + k * 4099 % (512U << 10), there = 7 + k * 8191 % (1U << 20);
		struct rdmamem_copy within = { .from_region = a,
					       .from_offset = at,
					       .to_region = a,
					       .to_offset = at + (2U << 20),
					       .length = n,
					       .mode = RDMAMEM_LOCK_EXCLUSIVE };
		struct rdmamem_copy across = { .from_region = a,
					       .from_offset = at + (2U << 20),
					       .to_region = b,
					       .to_offset = there,
					       .length = n,
					       .mode = RDMAMEM_LOCK_EXCLUSIVE };

		fill(in, n, t->seed + k);
		if (rdmamem_write(c, a, at, in, n, RDMAMEM_LOCK_EXCLUSIVE, 0) < 0 ||
		    rdmamem_copy(c, &within) < 0 || rdmamem_copy(c, &across) < 0 ||
		    rdmamem_read(c, b, there, out, n, 0) < 0)
			snprintf(t->failure, sizeof(t->failure), "round %u: %s", k,
				 rdmamem_client_error_message(c));
		else if (memcmp(in, out, n) != 0)
			snprintf(t->failure, sizeof(t->failure),
				 "round %u: GPU %d -> GPU %d bytes differ", k, t->own, t->other);
	}
out:
	free(in);
	free(out);
	rdmamem_client_close(c);
	return NULL;
}

/*
 * The context guard under load: two clients on two threads copy at once,
 * one within GPU 0 and across to GPU 1, the other within GPU 1 and across
 * to GPU 0, each checking every byte; the daemon's pool threads switch
 * between both GPUs' contexts meanwhile. No context reference is left.
 */
START_TEST(test_two_gpus_two_threads)
{
	struct x2_thread t[2] = { { .own = 0, .other = 1, .seed = 3 },
				  { .own = 1, .other = 0, .seed = 9 } };
	struct rdmamem_client *c;
	pthread_t th[2];
	bool both;

	if (!two_gpus_or_skip(__func__))
		return;
	both = can_access_peer(0, 1) && can_access_peer(1, 0);
	for (int i = 0; i < 2; i++) {
		vmm_alloc_on(t[i].own, 4U << 20, &t[i].size, &t[i].fd_own);
		vmm_alloc_on(t[i].other, 4U << 20, &t[i].size, &t[i].fd_other);
	}
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, x2_thread, &t[i]), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		ck_assert_msg(!t[i].failure[0], "thread on GPU %d: %s", t[i].own, t[i].failure);
		close(t[i].fd_own);
		close(t[i].fd_other);
	}
	c = test_client(td.socket);
	/* 40 rounds of each thread crossed over. */
	ck_assert_uint_ge(pair_copies(c, 0, 1, both ? "peer" : "staged"), 40);
	ck_assert_uint_ge(pair_copies(c, 1, 0, both ? "peer" : "staged"), 40);
	expect_refs(c, 0, 0);
	expect_refs(c, 1, 0);
	rdmamem_client_close(c);
}
END_TEST

/* GPU 0 as ListGpus has it: the daemon's context references, whether one
 * is its own, its regions. */
static void gpu0_state(struct rdmamem_client *c, int *refs, bool *kept, int *regions)
{
	cJSON *r = list_gpus(c), *g = gpu_of(r, 0);

	*refs = cJSON_GetObjectItem(g, "primary_context_refs")->valueint;
	*kept = cJSON_IsTrue(cJSON_GetObjectItem(g, "context_kept"));
	*regions = cJSON_GetObjectItem(g, "regions")->valueint;
	cJSON_Delete(r);
}

/* Polls GPU 0 until the daemon keeps its context or does not, within
 * msec; then its references must be want. */
static void expect_kept(struct rdmamem_client *c, bool want_kept, int want_refs, int msec)
{
	int refs = -1, regions = -1;
	bool kept = !want_kept;

	for (int i = 0; i <= msec / 20; i++) {
		gpu0_state(c, &refs, &kept, &regions);
		if (kept == want_kept && refs == want_refs)
			break;
		usleep(20000);
	}
	ck_assert_msg(kept == want_kept && refs == want_refs,
		      "GPU 0: context %s with %d references (%d regions); expected %s with %d",
		      kept ? "kept" : "not kept", refs, regions, want_kept ? "kept" : "not kept",
		      want_refs);
}

static double register_vmm_usec(struct rdmamem_client *c, int fd, size_t size, uint64_t *id)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	ck_assert_int_eq(rdmamem_register_cuda_vmm(c, fd, size, 0, 0, id), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3;
}

/*
 * The daemon keeps GPU 0's primary context between its regions for
 * --gpu-context-linger-sec (gpu_linger.c): after the last region goes its
 * own reference stays, through a VMM region's release and an IPC open's
 * close alike; the linger's end lets it go. The Registers' times are
 * printed, not asserted: the first creates the context, the next must not.
 */
START_TEST(test_context_kept_between_regions)
{
	static const char *const linger[] = { "--gpu-context-linger-sec=2", NULL };
	uint8_t handle[RDMAMEM_CUDA_IPC_HANDLE_SIZE];
	struct rdmamem_client *c;
	double first, again;
	size_t size;
	uint64_t id;
	int fd;

	test_daemon_stop(&td);
	test_daemon_start(&td, linger);
	c = test_client(td.socket);
	vmm_alloc(2 << 20, &size, &fd);
	ipc_alloc(1 << 20, handle);

	first = register_vmm_usec(c, fd, size, &id);
	expect_kept(c, true, 2, 5000);
	ck_assert_int_eq(rdmamem_unregister(c, id), 0);
	expect_kept(c, true, 1, 5000);
	again = register_vmm_usec(c, fd, size, &id);
	ck_assert_int_eq(rdmamem_unregister(c, id), 0);
	printf("VMM Register: %.0f us creating the context, %.0f us with it kept\n", first, again);

	ck_assert_int_eq(rdmamem_register_cuda_ipc(c, handle, 0, 0, 0, &id), 0);
	expect_kept(c, true, 2, 5000);
	ck_assert_int_eq(rdmamem_unregister(c, id), 0);
	/* The open closes on the pool; the context stays. */
	expect_kept(c, true, 1, 5000);

	expect_kept(c, false, 0, 10000);
	close(fd);
	rdmamem_client_close(c);
}
END_TEST

#endif

Suite *gpu_suite(void)
{
	Suite *s = suite_create("gpu");
	TCase *tc = tcase_create("nodriver");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_gpu_import_without_driver);
	tcase_add_test(tc, test_gpu_params);
	tcase_add_test(tc, test_list_gpus_lazily);
	suite_add_tcase(s, tc);

#if HAVE_CUDA_H
	tc = tcase_create("cuda");
	tcase_set_tags(tc, "cuda");
	tcase_add_checked_fixture(tc, gpu_setup, teardown);
	tcase_set_timeout(tc, 120);
	test_add_tagged(tc, "cuda", test_vmm_read_write);
	test_add_tagged(tc, "cuda", test_vmm_chunks);
	test_add_tagged(tc, "cuda", test_ipc_twice);
	test_add_tagged(tc, "cuda", test_copy_directions);
	test_add_tagged(tc, "cuda", test_copy_overlapping_gpu);
	test_add_tagged(tc, "cuda", test_gpu_registration_without_rdma);
	test_add_tagged(tc, "cuda", test_context_kept_between_regions);
	suite_add_tcase(s, tc);

	tc = tcase_create("cuda-2gpu");
	tcase_set_tags(tc, "cuda");
	tcase_add_checked_fixture(tc, gpu2_setup, teardown);
	tcase_set_timeout(tc, 120);
	test_add_tagged(tc, "cuda", test_two_gpus_copies);
	test_add_tagged(tc, "cuda", test_two_gpus_copies_staged);
	test_add_tagged(tc, "cuda", test_two_gpus_two_threads);
	suite_add_tcase(s, tc);

	tc = tcase_create("cuda-exit");
	tcase_set_tags(tc, "cuda");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	test_add_tagged(tc, "cuda", test_client_exit_while_in_use);
	suite_add_tcase(s, tc);
#else
	test_note_not_built("gpu: CUDA allocations imported by a real daemon (tcases cuda, "
			    "cuda-2gpu, cuda-exit)",
			    "cuda.h");
#endif
	return s;
}
