// Starts `tessera serve` for the Node tests (the SDK and the chat page): `CLI serve ARGS...` with its
// stderr collected; `port` resolves to the port it listens on once the model is loaded, and rejects
// if it exits first or has not started within 30 s. The caller stops `process` (the child).
import { spawn } from "node:child_process";

export function startServer(cli, args) {
  const child = spawn(cli, ["serve", ...args], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  const port = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the server did not start: " + log)), 30000);
    child.stderr.on("data", (d) => {
      log += d;
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m && log.includes("model loaded")) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    child.on("exit", (code) => reject(new Error(`the server exited (${code}): ${log}`)));
  });
  return { process: child, port, log: () => log };
}
