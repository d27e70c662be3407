// NotifierService.ListDeliveries: newest first, of one notifier or all, in one state or any.
import type { MessageInitShape } from "@bufbuild/protobuf";
import { DeliveryState, type ListDeliveriesRequest, type ListDeliveriesResponseSchema } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import type { Store } from "@flotilla/store";
import { invalidArgument } from "../../errors.ts";
import * as validate from "../../validate.ts";

export function listDeliveries(store: Store) {
  return async (req: ListDeliveriesRequest): Promise<MessageInitShape<typeof ListDeliveriesResponseSchema>> => {
    if (req.notifier !== "") validate.dnsLabel("notifier", req.notifier);
    if (DeliveryState[req.state] === undefined) throw invalidArgument("state", `${req.state} is not a DeliveryState`);
    const page = await store.notifications.deliveries({ notifier: req.notifier || undefined, state: req.state || undefined }, req.pageSize, req.pageToken);
    return { deliveries: page.items, nextPageToken: page.nextPageToken };
  };
}
