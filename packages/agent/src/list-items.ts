// A list response read item by item as it arrives. A page of 500 Deployments is 1–2 MB of JSON;
// parsed whole, the page's text and its 500 objects (managedFields included) live until the
// last item has been reduced, long enough to be promoted out of V8's young generation. That
// garbage, not what the agent keeps, set the agent's peak RSS at a restart (a relist of every
// managed object). Parsed one item at a time, each object is garbage as soon as the caller has
// reduced it, and dies young.

/**
 * Splits the JSON text of a Kubernetes list (`{"kind":…,"metadata":{…},"items":[{…},…]}`),
 * pushed in chunks of any size, into its items — each parsed and handed to `onItem` as soon as
 * its closing brace arrives — and the rest of the object, returned by `end()` with `items: []`.
 */
export class ListItemSplitter {
  readonly #onItem: (item: unknown) => void;
  #depth = 0;
  #inString = false;
  #escaped = false;
  /** Inside the value of the top-level `items` array. */
  #inItems = false;
  /** The text of an item in progress, carried to the next chunk. */
  #carry = "";
  /** The text outside the items (small: kind, apiVersion, metadata). */
  #rest = "";

  constructor(onItem: (item: unknown) => void) {
    this.#onItem = onItem;
  }

  push(chunk: string): void {
    const text = this.#carry + chunk;
    let itemStart = this.#carry === "" ? -1 : 0;
    let restStart = this.#inItems ? -1 : 0;
    for (let i = this.#carry.length; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (this.#inString) {
        if (this.#escaped) this.#escaped = false;
        else if (c === BACKSLASH) this.#escaped = true;
        else if (c === QUOTE) this.#inString = false;
      } else if (c === QUOTE) {
        this.#inString = true;
      } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
        if (c === OPEN_BRACKET && this.#depth === 1 && ITEMS_KEY.test(this.#rest + text.slice(restStart, i))) {
          this.#rest += text.slice(restStart, i + 1);
          restStart = -1;
          this.#inItems = true;
        }
        this.#depth++;
        if (this.#inItems && this.#depth === 3) itemStart = i;
      } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        this.#depth--;
        if (this.#inItems && this.#depth === 2 && itemStart !== -1) {
          this.#onItem(JSON.parse(text.slice(itemStart, i + 1)));
          itemStart = -1;
        } else if (this.#inItems && this.#depth === 1) {
          this.#inItems = false;
          restStart = i;
        }
      }
    }
    if (restStart !== -1) this.#rest += text.slice(restStart);
    this.#carry = itemStart === -1 ? "" : text.slice(itemStart);
  }

  /** The list without its items; throws if the text ended inside the object. */
  end(): Record<string, unknown> {
    if (this.#depth !== 0 || this.#inString || this.#carry !== "") throw new Error("the list's JSON ends before its object does");
    const rest = JSON.parse(this.#rest) as Record<string, unknown>;
    rest.items = [];
    return rest;
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
/** The rest so far ends with the top-level key `items`. */
const ITEMS_KEY = /"items"\s*:\s*$/;
