/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Varlink error names the daemon sends and the negative errno the client
 * library turns each into. One table (errors.c), so both sides agree, and
 * the IDL declares each error from it.
 */
#ifndef RDMAMEM_ERRORS_H
#define RDMAMEM_ERRORS_H

#include "proto/idl.h"

#define VARLINK_ERROR_INTERFACE_NOT_FOUND "org.varlink.service.InterfaceNotFound"
#define VARLINK_ERROR_METHOD_NOT_FOUND "org.varlink.service.MethodNotFound"
#define VARLINK_ERROR_METHOD_NOT_IMPLEMENTED "org.varlink.service.MethodNotImplemented"
#define VARLINK_ERROR_INVALID_PARAMETER "org.varlink.service.InvalidParameter"
#define VARLINK_ERROR_PERMISSION_DENIED "org.varlink.service.PermissionDenied"
#define VARLINK_ERROR_EXPECTED_MORE "org.varlink.service.ExpectedMore"

#define RDMAMEM_ERROR_INVALID_MESSAGE "io.rdmamemd.InvalidMessage"
#define RDMAMEM_ERROR_MESSAGE_TOO_LARGE "io.rdmamemd.MessageTooLarge"
#define RDMAMEM_ERROR_TOO_MANY_FDS "io.rdmamemd.TooManyFileDescriptors"
#define RDMAMEM_ERROR_TOO_MANY_CONNECTIONS "io.rdmamemd.TooManyConnections"
#define RDMAMEM_ERROR_SHUTTING_DOWN "io.rdmamemd.ShuttingDown"
#define RDMAMEM_ERROR_INTERNAL "io.rdmamemd.InternalError"
#define RDMAMEM_ERROR_NO_SUCH_REGION "io.rdmamemd.NoSuchRegion"
#define RDMAMEM_ERROR_PERMISSION_DENIED "io.rdmamemd.PermissionDenied"
#define RDMAMEM_ERROR_QUOTA_EXCEEDED "io.rdmamemd.QuotaExceeded"
#define RDMAMEM_ERROR_NOT_A_MEMFD "io.rdmamemd.NotAMemfd"
#define RDMAMEM_ERROR_MISSING_SEAL "io.rdmamemd.MissingSeal"
#define RDMAMEM_ERROR_MEMORY_UNAVAILABLE "io.rdmamemd.MemoryUnavailable"
#define RDMAMEM_ERROR_OUT_OF_RANGE "io.rdmamemd.OutOfRange"
#define RDMAMEM_ERROR_READ_ONLY "io.rdmamemd.ReadOnlyRegion"
#define RDMAMEM_ERROR_TRANSFER_TOO_LARGE "io.rdmamemd.TransferTooLarge"
#define RDMAMEM_ERROR_NO_SUCH_LEASE "io.rdmamemd.NoSuchLease"
#define RDMAMEM_ERROR_LEASE_CONFLICT "io.rdmamemd.LeaseConflict"
#define RDMAMEM_ERROR_LOCK_TIMEOUT "io.rdmamemd.LockTimeout"
#define RDMAMEM_ERROR_NO_SUCH_DEVICE "io.rdmamemd.NoSuchDevice"
#define RDMAMEM_ERROR_INVALID_TOKEN "io.rdmamemd.InvalidToken"
#define RDMAMEM_ERROR_NOT_REGISTERED "io.rdmamemd.NotRegistered"
#define RDMAMEM_ERROR_NO_RDMA_ENDPOINT "io.rdmamemd.NoRdmaEndpoint"
#define RDMAMEM_ERROR_NO_SUCH_REMOTE "io.rdmamemd.NoSuchRemote"
#define RDMAMEM_ERROR_NO_SUCH_PLAN "io.rdmamemd.NoSuchPlan"
#define RDMAMEM_ERROR_REMOTE_ACCESS "io.rdmamemd.RemoteAccessError"
#define RDMAMEM_ERROR_PEER_UNREACHABLE "io.rdmamemd.PeerUnreachable"
#define RDMAMEM_ERROR_TRANSFER_CANCELLED "io.rdmamemd.TransferCancelled"
#define RDMAMEM_ERROR_TRANSFER_FAILED "io.rdmamemd.TransferFailed"
#define RDMAMEM_ERROR_NETWORK_NOT_ALLOWED "io.rdmamemd.NetworkNotAllowed"
#define RDMAMEM_ERROR_CUDA_UNAVAILABLE "io.rdmamemd.CudaUnavailable"
#define RDMAMEM_ERROR_CUDA "io.rdmamemd.CudaError"

/* Every error of both interfaces; a NULL name ends it. */
extern const struct varlink_error rdmamem_errors[];

/* The error of that name, or NULL. */
const struct varlink_error *rdmamem_error_find(const char *name);

/* Negative errno for a Varlink error name; -EREMOTEIO for names not known
 * to this build. */
int rdmamem_error_to_errno(const char *name);

#endif
