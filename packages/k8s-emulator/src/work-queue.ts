// The controllers' work queue (after client-go's workqueue, as far as they need it): a key added
// any number of times before its turn is reconciled once, on a later turn, so that the write
// that added it, inside the store's event, is answered first, as a controller fed by a watch.
export class WorkQueue {
  private readonly pending = new Set<string>();
  private readonly reconcile: (key: string) => void;

  constructor(reconcile: (key: string) => void) {
    this.reconcile = reconcile;
  }

  add(key: string): void {
    if (this.pending.has(key)) return;
    this.pending.add(key);
    setImmediate(() => {
      this.pending.delete(key);
      this.reconcile(key);
    });
  }

  /** Forgets the keys waiting: their turns still come, and a key added again gets one more. */
  clear(): void {
    this.pending.clear();
  }
}
