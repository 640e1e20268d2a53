// Preloaded into Azurite by devhost (NODE_OPTIONS=--require, devhost/storage/azurite.py). Azurite saves its data
// when it gets SIGTERM, with a one-time listener (process.once in azurite.js): a second SIGTERM would then
// meet Node's default action and end it mid-save. The kernel sends one SIGTERM per devhost thread that dies
// (PR_SET_PDEATHSIG follows the child's reparenting from thread to thread when devhost is killed), so this
// listener, which does nothing, keeps every SIGTERM after the first harmless.
process.on("SIGTERM", () => {});
