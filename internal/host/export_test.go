package host

// Resolve is resolve, for the tests of SPEC §7.
var Resolve = resolve
