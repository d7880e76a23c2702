// The notifications inbox: the unread count in the header, kept live by a socket of the
// user's own (the server sends {type: inbox, thread, unreadCount} to every socket of the
// user), and the page of threads with read and mark-all-read.
import { get, patch, put } from "./api.js";
import { h, mount, timeEl } from "./dom.js";
import { repoHash } from "./views.js";

let socket = null;
let stopped = true;
let attempt = 0;
let retryTimer = null;
let onChange = null; // the inbox page's refresh while it is shown

const REASON = {
  assign: "assigned",
  author: "author",
  comment: "commented",
  mention: "mentioned",
  review_requested: "review requested",
  state_change: "state changed",
  team_mention: "team mentioned",
  subscribed: "subscribed",
};

function showCount(n) {
  const badge = document.getElementById("inbox-count");
  badge.textContent = n > 99 ? "99+" : String(n);
  badge.hidden = !n;
  document.getElementById("nav-inbox").setAttribute("aria-label", n ? `Inbox, ${n} unread` : "Inbox");
}

async function readCount() {
  const data = await get("/api/notifications?limit=1");
  showCount(data.unreadCount || 0);
}

export function startInbox() {
  if (socket && !stopped) {
    readCount().catch(() => {}); // already open for this person: the count may have moved
    return;
  }
  stopInbox();
  stopped = false;
  attempt = 0;
  readCount().catch(() => {});
  open();
}

export function stopInbox() {
  stopped = true;
  clearTimeout(retryTimer);
  if (socket) {
    const ws = socket;
    socket = null;
    ws.close();
  }
}

function open() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${proto}//${location.host}/ws`);
  socket = ws;
  ws.onmessage = (msg) => {
    let m;
    try {
      m = JSON.parse(msg.data);
    } catch (_) {
      return;
    }
    if (m.type === "inbox") {
      showCount(m.unreadCount || 0);
      if (onChange) onChange();
    } else if (m.type === "connected") {
      if (attempt) readCount().catch(() => {}); // back after a drop: what changed meanwhile
      attempt = 0;
    } else if (m.type === "ping") ws.send(JSON.stringify({ type: "pong" }));
  };
  ws.onclose = () => {
    if (socket !== ws) return;
    socket = null;
    if (stopped) return;
    const delay = Math.min(10000, 500 * 2 ** attempt) * (0.75 + Math.random() / 2);
    attempt += 1;
    retryTimer = setTimeout(() => !stopped && open(), delay);
  };
}

export function leaveInbox() {
  onChange = null;
}

function subjectHash(n) {
  const kind = n.subject.type === "PullRequest" ? "pulls" : "issues";
  return `${repoHash(n.repository.owner, n.repository.name)}/${kind}/${n.subject.number}`;
}

function threadItem(n, refresh) {
  const link = h("a", { href: subjectHash(n), class: "thread-link" }, n.subject.title);
  // Opening a thread reads it, as on GitHub.
  link.addEventListener("click", () => {
    if (n.unread) patch(`/api/notifications/threads/${encodeURIComponent(n.id)}`).catch(() => {});
  });
  const read = h("button", { type: "button", class: "link-button mark-read", "aria-label": `Mark ${n.subject.title} read` }, "Mark read");
  read.addEventListener("click", async () => {
    read.disabled = true;
    n.unread = false;
    item.classList.remove("unread");
    read.remove();
    try {
      await patch(`/api/notifications/threads/${encodeURIComponent(n.id)}`);
    } catch (_) {
      refresh();
    }
  });
  const item = h(
    "li",
    { class: `item notice${n.unread ? " unread" : ""}`, "data-id": n.id },
    h("span", { class: "dot", "aria-hidden": "true" }),
    h(
      "span",
      { class: "notice-main" },
      h("span", { class: "muted" }, `${n.repository.owner}/${n.repository.name} #${n.subject.number} `),
      link,
      " ",
      h("span", { class: `state s-${n.subject.state}` }, n.subject.state),
      " ",
      h("span", { class: "badge reason" }, REASON[n.reason] || n.reason),
    ),
    h("span", { class: "notice-side" }, timeEl(n.updatedAt), n.unread ? read : null),
  );
  return item;
}

// #/inbox: unread threads, or all of them with ?all=1.
export async function showInbox(params) {
  const all = params.get("all") === "1";
  const list = h("ul", { class: "list", id: "inbox" });
  const empty = h("p", { class: "muted", id: "inbox-empty", hidden: true }, all ? "Nothing yet." : "All caught up.");
  const markAll = h("button", { type: "button", id: "mark-all-read" }, "Mark all as read");
  const refresh = async () => {
    const data = await get(`/api/notifications?limit=50${all ? "&all=true" : ""}`);
    list.replaceChildren(...data.notifications.map((n) => threadItem(n, refresh)));
    empty.hidden = data.notifications.length > 0;
    showCount(data.unreadCount || 0);
  };
  markAll.addEventListener("click", async () => {
    markAll.disabled = true;
    try {
      await put("/api/notifications", {});
      await refresh();
    } finally {
      markAll.disabled = false;
    }
  });
  mount(
    h("div", { class: "title-row" }, h("h1", {}, "Inbox"), markAll),
    h(
      "nav",
      { class: "tabs", "aria-label": "Which threads" },
      h("a", { href: "#/inbox", class: all ? "" : "current" }, "Unread"),
      h("a", { href: "#/inbox?all=1", class: all ? "current" : "" }, "All"),
    ),
    list,
    empty,
  );
  await refresh();
  onChange = () => refresh().catch(() => {});
}

