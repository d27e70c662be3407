// Loaded into every test process (node --import, which the runner passes on to each file's
// process): makes stdout's writes blocking. Each test file reports to the runner over a pipe,
// whose writes are asynchronous on Linux, and --test-force-exit ends the process as soon as its
// tests are done: the last verdicts still buffered were dropped, and the runner counted fewer
// tests than ran (a failure among them still failed the file, but without its name or error).
// A reported count is then the count that ran.
const stdout = process.stdout as typeof process.stdout & { _handle?: { setBlocking?: (blocking: boolean) => void } };
stdout._handle?.setBlocking?.(true);
