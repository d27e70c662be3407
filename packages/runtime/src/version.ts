// The release every process reports (ctrl's WhoAmI, `flotilla version`). One number for the
// whole repository: its processes are released together.
export const FLOTILLA_VERSION = "0.9.0";
