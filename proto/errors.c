/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <string.h>

#include "proto/errors.h"
#include "util/macro.h"

/*
 * Each error once: its name, the errno the client library returns for it,
 * the parameters it declares and its doc, which the IDL of its interface
 * shows (io.rdmamemd's in the order they are printed).
 */
/* clang-format off */
/* What every Transfer error says of the batch: the first op that failed,
 * and how far the batch got. */
#define TRANSFER_PROGRESS_FIELDS                                        \
	VARLINK_FIELD(index, VARLINK_U64, VARLINK_NULLABLE),            \
	VARLINK_FIELD(ops_done, VARLINK_U64, VARLINK_NULLABLE),         \
	VARLINK_FIELD(ops_failed, VARLINK_U64, VARLINK_NULLABLE),       \
	VARLINK_FIELD(bytes_done, VARLINK_U64, VARLINK_NULLABLE)
/* And, where a completion failed, its status and the device's error. */
#define TRANSFER_COMPLETION_FIELDS                                      \
	VARLINK_FIELD(status, VARLINK_STRING, VARLINK_NULLABLE),        \
	VARLINK_FIELD(vendor_error, VARLINK_INT, VARLINK_NULLABLE)

const struct varlink_error rdmamem_errors[] = {
	VARLINK_DEFINE_ERROR(
		VARLINK_ERROR_INTERFACE_NOT_FOUND, EPROTONOSUPPORT,
		"The requested interface was not found.",
		VARLINK_FIELD(interface, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		VARLINK_ERROR_METHOD_NOT_FOUND, EOPNOTSUPP,
		"The requested method was not found",
		VARLINK_FIELD(method, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		VARLINK_ERROR_METHOD_NOT_IMPLEMENTED, EOPNOTSUPP,
		"The interface defines the requested method, but the service does not\n"
		"implement it.",
		VARLINK_FIELD(method, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		VARLINK_ERROR_INVALID_PARAMETER, EINVAL,
		"One of the passed parameters is invalid.",
		VARLINK_FIELD(parameter, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		VARLINK_ERROR_PERMISSION_DENIED, EACCES,
		"Client is denied access"),
	VARLINK_DEFINE_ERROR(
		VARLINK_ERROR_EXPECTED_MORE, EINVAL,
		"Method is expected to be called with 'more' set to true, but wasn't"),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_CUDA_UNAVAILABLE, ENXIO,
		"No CUDA driver (libcuda.so.1) or no GPU: GPU imports cannot work here.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_CUDA, EIO,
		"The CUDA driver refused: the message has the CUresult and the call.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_NO_SUCH_DEVICE, ENODEV,
		"No such RDMA device is open.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_INVALID_TOKEN, EKEYREJECTED,
		"No such access token: never issued, revoked, or its creator disconnected.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_NOT_REGISTERED, ENOLINK,
		"ExportRegion: the region has no registration in force on a device asked\n"
		"for (or, devices left out, on any): there is no rkey to describe.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_NO_RDMA_ENDPOINT, EADDRNOTAVAIL,
		"ExportRegion: the daemon accepts no RDMA connections (no rdmacm-listen\n"
		"address, or none of its addresses is on an exported device), so no peer\n"
		"could reach the region.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_NO_SUCH_REMOTE, ENOENT,
		"This connection holds no remote handle of that id (never imported, or\n"
		"released).",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_NO_SUCH_PLAN, ENOENT,
		"This connection holds no plan of that id (never prepared, or released).",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_REMOTE_ACCESS, EACCES,
		"Transfer: the remote device refused an op (rkey, bounds or access: the\n"
		"remote owner unregistered, or registered without that access). status\n"
		"is the completion's, vendor_error the device's; the ops after it on the\n"
		"same queue pair were flushed.",
		TRANSFER_PROGRESS_FIELDS,
		TRANSFER_COMPLETION_FIELDS,
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_PEER_UNREACHABLE, EHOSTUNREACH,
		"Transfer: the remote daemon could not be reached (connect refused, with\n"
		"the endpoint's reason, rejected, timed out, no route) or stopped\n"
		"answering (transport retries exceeded).",
		TRANSFER_PROGRESS_FIELDS,
		TRANSFER_COMPLETION_FIELDS,
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_TRANSFER_CANCELLED, ECANCELED,
		"Transfer: the op was not posted because the transfer was cancelled (its\n"
		"client went away, the daemon is shutting down).",
		TRANSFER_PROGRESS_FIELDS,
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_TRANSFER_FAILED, EIO,
		"Transfer: an op did not complete for another reason: a local access\n"
		"error, or its queue pair failed or closed under it (the remote daemon\n"
		"disconnected, the token was revoked); status as for RemoteAccessError\n"
		"when a completion said so.",
		TRANSFER_PROGRESS_FIELDS,
		TRANSFER_COMPLETION_FIELDS,
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_NETWORK_NOT_ALLOWED, ECONNREFUSED,
		"A remote peer (by its GID, for ConnectQueuePair) is outside the networks\n"
		"the daemon admits RDMA peers from.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_NO_SUCH_REGION, ENOENT,
		"No region with that id: never registered, or unregistered since.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_PERMISSION_DENIED, EACCES,
		"The caller's uid may not do that with this region.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_MEMORY_UNAVAILABLE, ENOMEM,
		"The memory handed over cannot be mapped: e.g. a hugetlb memfd and no free\n"
		"huge pages of its size. The message says how many there are.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_QUOTA_EXCEEDED, EDQUOT,
		"A limit would be passed: quota is \"regions\", \"pinned_bytes\", \"leases\",\n"
		"\"tokens\", \"rdma_connections\", \"remotes\" or \"plans\" (per uid), or\n"
		"\"shares\" (per region).",
		VARLINK_FIELD(quota, VARLINK_STRING, 0),
		VARLINK_FIELD(limit, VARLINK_STRING, 0),
		VARLINK_FIELD(used, VARLINK_STRING, 0),
		VARLINK_FIELD(requested, VARLINK_STRING, 0),
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_NOT_A_MEMFD, EBADFD,
		"The file descriptor is not a memfd (or other sealable shmem file).",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_MISSING_SEAL, EPERM,
		"The memfd lacks F_SEAL_SHRINK.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_OUT_OF_RANGE, ERANGE,
		"A range lies outside the file or the region, or its end overflows.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_READ_ONLY, EROFS,
		"The region's memfd cannot be written (opened read-only or write-sealed):\n"
		"no writes, and before Linux 6.2 no RDMA registration either.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_TRANSFER_TOO_LARGE, E2BIG,
		"More bytes than one Read answers inline.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_NO_SUCH_LEASE, ENOENT,
		"This connection holds no such lease.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_LEASE_CONFLICT, EBUSY,
		"The lease named is on another region, still waiting, or shared for a write.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_LOCK_TIMEOUT, ETIMEDOUT,
		"The lock was not granted in time.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_INVALID_MESSAGE, EBADMSG,
		"The message was not a well-formed call: not UTF-8, not JSON, not an\n"
		"object, no method, or fields of the wrong type.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_MESSAGE_TOO_LARGE, EMSGSIZE,
		"The message was larger than 16 MiB. The daemon closes the connection.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_TOO_MANY_FDS, ETOOMANYREFS,
		"The message carried more file descriptors than allowed (16), or the\n"
		"method takes none.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_TOO_MANY_CONNECTIONS, EUSERS,
		"The daemon serves too many connections, in total or for this uid. The\n"
		"daemon closes the connection after this reply.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_SHUTTING_DOWN, ESHUTDOWN,
		"The daemon is stopping and takes no new calls.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	VARLINK_DEFINE_ERROR(
		RDMAMEM_ERROR_INTERNAL, EIO,
		"The daemon failed in a way the client could not have caused.",
		VARLINK_FIELD(message, VARLINK_STRING, 0)),
	{},
};
/* clang-format on */

const struct varlink_error *rdmamem_error_find(const char *name)
{
	for (const struct varlink_error *e = rdmamem_errors; e->name; e++)
		if (strcmp(e->name, name) == 0)
			return e;
	return NULL;
}

int rdmamem_error_to_errno(const char *name)
{
	const struct varlink_error *e = rdmamem_error_find(name);

	return e ? -e->err : -EREMOTEIO;
}
