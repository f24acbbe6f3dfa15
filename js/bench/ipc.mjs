// What the bench scripts share: waiting for a server child's answer.

/**
 * The next message of `type` from a child process (after sending it `send`,
 * when given); rejects if the child exits first.
 */
export function answerOf(child, type, send = null) {
  return new Promise((resolve, reject) => {
    const onMessage = (m) => {
      if (m.type !== type) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(m);
    };
    const onExit = (code, signal) => reject(new Error(`the server exited (${signal ?? code}) before answering ${type}`));
    child.on('message', onMessage);
    child.on('exit', onExit);
    if (send !== null) child.send(send);
  });
}
