// One repository's events, live, for the page that shows one of its issues or pull
// requests: a WebSocket subscribed to that repository only. After a drop it comes back
// and the page reads everything again (`onEvent(null)`), so nothing missed stays missed.
import { ApiError, get } from "./api.js";

let socket = null;
let stopped = true;
let attempt = 0;
let retryTimer = null;
let target = null; // {owner, name, onEvent}

function setStatus(text, kind) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = `status ${kind || ""}`;
}

export function stopWatching() {
  stopped = true;
  target = null;
  clearTimeout(retryTimer);
  if (socket) {
    const ws = socket;
    socket = null;
    ws.close();
  }
}

// Calls onEvent(event) for each event of owner/name, and onEvent(null) after a reconnect.
export function watchRepo(owner, name, onEvent) {
  stopWatching();
  stopped = false;
  attempt = 0;
  target = { owner, name, onEvent };
  open(false);
}

function open(again) {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${proto}//${location.host}/ws`);
  const mine = target;
  socket = ws;
  ws.onmessage = (msg) => {
    let m;
    try {
      m = JSON.parse(msg.data);
    } catch (_) {
      return;
    }
    if (target !== mine) return;
    if (m.type === "connected") {
      ws.send(JSON.stringify({ type: "subscribe", repository: { owner: mine.owner, name: mine.name } }));
    } else if (m.type === "subscribed") {
      attempt = 0;
      setStatus("live", "live");
      if (again) mine.onEvent(null);
    } else if (m.type === "notification" && m.notification) {
      const repo = m.notification.repository || {};
      if (repo.owner === mine.owner && repo.name === mine.name) mine.onEvent(m.notification);
    } else if (m.type === "ping") ws.send(JSON.stringify({ type: "pong" }));
    else if (m.type === "resync") ws.close();
  };
  ws.onclose = (ev) => {
    if (socket !== ws) return;
    socket = null;
    if (stopped) return;
    if (ev.code === 4001) {
      location.hash = "#/sign-in";
      return;
    }
    const delay = Math.min(10000, 500 * 2 ** attempt) * (0.75 + Math.random() / 2);
    attempt += 1;
    setStatus("reconnecting…", "reconnecting");
    retryTimer = setTimeout(resume, delay);
  };
}

async function resume() {
  if (stopped) return;
  try {
    await get("/api/users/me");
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) location.hash = "#/sign-in";
    else retryTimer = setTimeout(resume, 2000);
    return;
  }
  if (!stopped) open(true);
}
