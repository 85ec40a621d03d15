/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/core.h"
#include "daemon/rdma/rdma.h"
#include "daemon/rdma/device.h"
#include "daemon/core/log.h"

static bool in_list(char *const *list, const char *name)
{
	for (; list && *list; list++)
		if (strcmp(*list, name) == 0)
			return true;
	return false;
}

bool device_allowed(const struct rdma_ctx *rdma, const char *name)
{
	if (rdma->core->cfg.devices_allow && !in_list(rdma->core->cfg.devices_allow, name))
		return false;
	return !in_list(rdma->core->cfg.devices_deny, name);
}

bool device_name_is_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= VB_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.'))
			return false;
	return true;
}

static void device_note_event(struct device *dev, const char *text)
{
	unsigned i = dev->n_events++ % DEVICE_EVENTS_KEPT;

	dev->events[i].msec = uv_now(dev->rdma->core->loop);
	snprintf(dev->events[i].text, sizeof(dev->events[i].text), "%s", text);
}

static void on_async_event(uv_poll_t *h, int status, int events)
{
	struct device *dev = h->data;
	struct vb_event ev;

	(void)events;
	if (status < 0)
		return;
	while (vb->device_next_event(dev->vb, &ev) == 0) {
		char text[64];

		if (ev.port)
			snprintf(text, sizeof(text), "%s (port %u)", ev.name, ev.port);
		else
			snprintf(text, sizeof(text), "%s", ev.name);
		device_note_event(dev, text);
		switch (ev.kind) {
		case VB_EVENT_DEVICE_FATAL:
			dev->fatal = true;
			log_full_fields(LOG_ERR, 0, LOG_DEVICE(dev->info.name),
					"RDMA device %s: %s; new registrations on it will fail",
					dev->info.name, ev.name);
			break;
		case VB_EVENT_PORT_DOWN:
		case VB_EVENT_PORT_ACTIVE:
			log_full_fields(LOG_NOTICE, 0, LOG_DEVICE(dev->info.name),
					"RDMA device %s: %s", dev->info.name, text);
			/* Port state and GIDs change with it. */
			vb->device_query(dev->vb, &dev->info);
			break;
		default:
			log_full_fields(LOG_INFO, 0, LOG_DEVICE(dev->info.name),
					"RDMA device %s: %s", dev->info.name, text);
			break;
		}
	}
}

int devices_open(struct rdma_ctx *rdma)
{
	struct vb_device **list = NULL;
	size_t n = 0;
	int r;

	list_init(&rdma->devices);
	r = vb->devices_open(&list, &n);
	if (r < 0) {
		log_warning_errno(r, "Cannot list RDMA devices, continuing without: %m");
		return 0;
	}
	rdma->vb_devices = list;
	rdma->n_vb_devices = n;

	for (size_t i = 0; i < n; i++) {
		struct device *dev = calloc(1, sizeof(*dev));

		if (!dev)
			return -ENOMEM;
		dev->rdma = rdma;
		dev->vb = list[i];
		list_init(&dev->pds);
		r = vb->device_query(dev->vb, &dev->info);
		if (r < 0 || !device_allowed(rdma, dev->info.name)) {
			if (r < 0)
				log_warning_errno(r,
						  "Cannot query an RDMA device, skipping it: %m");
			else
				log_info("RDMA device %s excluded by configuration",
					 dev->info.name);
			free(dev);
			continue;
		}
		dev->backend = dev->info.mlx5 ? "mlx5" : "ibv";
		topo_rdma_device(rdma->sysfs ?: TOPO_SYSFS_DEFAULT, dev->info.name, &dev->place);
		if (uv_poll_init(rdma->core->loop, &dev->poll, vb->device_async_fd(dev->vb)) == 0) {
			dev->poll.data = dev;
			dev->polling = uv_poll_start(&dev->poll, UV_READABLE, on_async_event) == 0;
		}
		list_add_tail(&dev->link, &rdma->devices);
		rdma->n_devices++;
		log_info("RDMA device %s (%s backend, %zu ports, port 1 %s; PCI %s, NUMA node %d)",
			 dev->info.name, dev->backend, dev->info.n_ports,
			 dev->info.n_ports ? dev->info.ports[0].state : "-",
			 dev->place.pci[0] ? dev->place.pci : "unknown", dev->place.numa_node);
	}
	if (rdma->n_devices == 0)
		log_info("No RDMA devices: regions work, registrations on devices will fail");
	return 0;
}

void devices_stop(struct rdma_ctx *rdma)
{
	struct device *dev;

	list_for_each_entry(dev, &rdma->devices, link) {
		if (dev->polling && !uv_is_closing((uv_handle_t *)&dev->poll))
			uv_close((uv_handle_t *)&dev->poll, NULL);
	}
}

void devices_free(struct rdma_ctx *rdma)
{
	struct device *dev, *n;

	list_for_each_entry_safe(dev, n, &rdma->devices, link) {
		struct uid_pd *p, *pn;

		/* MRs and QPs went with their regions and connections. */
		list_for_each_entry_safe(p, pn, &dev->pds, link) {
			int r = vb->pd_free(p->pd);

			if (r < 0)
				log_warning_errno(
					r, "RDMA device %s: cannot free the PD of uid %u: %m",
					dev->info.name, (unsigned)p->uid);
			list_del(&p->link);
			free(p);
		}
		list_del(&dev->link);
		free(dev);
	}
	if (rdma->vb_devices)
		vb->devices_close(rdma->vb_devices, rdma->n_vb_devices);
	rdma->vb_devices = NULL;
	rdma->n_devices = 0;
}

struct device *device_find(struct rdma_ctx *rdma, const char *name)
{
	struct device *dev;

	list_for_each_entry(dev, &rdma->devices, link)
		if (strcmp(dev->info.name, name) == 0)
			return dev;
	return NULL;
}

int device_pd(struct device *dev, uid_t uid, struct vb_pd **ret)
{
	struct uid_pd *p;
	int r;

	list_for_each_entry(p, &dev->pds, link)
		if (p->uid == uid) {
			*ret = p->pd;
			return 0;
		}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	r = vb->pd_alloc(dev->vb, &p->pd);
	if (r < 0) {
		free(p);
		return r;
	}
	p->uid = uid;
	list_add_tail(&p->link, &dev->pds);
	dev->n_pds++;
	log_debug("RDMA device %s: protection domain for uid %u", dev->info.name, (unsigned)uid);
	*ret = p->pd;
	return 0;
}
