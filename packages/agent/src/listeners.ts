// A list of listeners, built before both the part that emits and the parts that listen, so that
// neither refers to a part built after it (the agent's parts notify each other in a cycle: the
// desired table and the observer tell the reporter, which reads both).

export class Listeners<T> {
  readonly #listeners: ((value: T) => void)[] = [];

  add(listener: (value: T) => void): void {
    this.#listeners.push(listener);
  }

  /** Calls every listener, in the order added (bound: pass it as a callback). */
  readonly emit = (value: T): void => {
    for (const listener of this.#listeners) listener(value);
  };
}
