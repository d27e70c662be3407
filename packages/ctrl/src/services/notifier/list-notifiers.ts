// NotifierService.ListNotifiers: by name, keyset pages.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ListNotifiersRequest, ListNotifiersResponseSchema } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import type { Store } from "@flotilla/store";

export function listNotifiers(store: Store) {
  return async (req: ListNotifiersRequest): Promise<MessageInitShape<typeof ListNotifiersResponseSchema>> => {
    const page = await store.notifications.list(req.pageSize, req.pageToken);
    return { notifiers: page.items, nextPageToken: page.nextPageToken };
  };
}
