// Issues and pull requests: a list per state, one page at a time, and one with its
// comments (a pull request with its files and diff too).
import { get, repoPath } from "./api.js";
import { h, mount, timeEl } from "./dom.js";
import { PAGE, crumbs, diffFiles, pageOf, pager, q, repoHash, section, stateTabs } from "./views.js";

const STATES = { issues: ["open", "closed", "all"], pulls: ["open", "closed", "merged", "all"] };
const NOUN = { issues: "issues", pulls: "pull requests" };

function stateOf(item) {
  if (item.merged) return "merged";
  return item.state;
}

// One line per issue or pull request: its number and title, state, author and age.
export function threadList(items, owner, name, kind, empty) {
  if (!items.length) return h("p", { class: "muted" }, empty);
  return h(
    "ul",
    { class: "list", id: `${kind}-list` },
    items.map((it) =>
      h(
        "li",
        { class: "item" },
        h("span", { class: `state s-${stateOf(it)}` }, stateOf(it)),
        " ",
        h("a", { href: `${repoHash(owner, name)}/${kind}/${it.number}` }, `#${it.number} ${it.title}`),
        " ",
        h("span", { class: "muted" }, (it.author && it.author.username) || ""),
        " ",
        timeEl(it.createdAt),
      ),
    ),
  );
}

export async function showThreads(owner, name, kind, params) {
  const states = STATES[kind];
  const state = states.includes(params.get("state")) ? params.get("state") : "open";
  const page = pageOf(params);
  const data = await get(
    `${repoPath(owner, name)}/${kind}?state=${state}&limit=${PAGE}&offset=${(page - 1) * PAGE}`,
  );
  const items = data.issues || data.pullRequests || [];
  const base = `${repoHash(owner, name)}/${kind}`;
  mount(
    crumbs(owner, name),
    h("h1", {}, kind === "pulls" ? "Pull requests" : "Issues"),
    stateTabs(base, states, state),
    threadList(items, owner, name, kind, `No ${state === "all" ? "" : `${state} `}${NOUN[kind]}.`),
    pager(page, data.hasMore, (n) => `${base}?state=${state}&page=${n}`),
  );
}

export async function showThread(owner, name, kind, number) {
  const base = `${repoPath(owner, name)}/${kind}/${q(number)}`;
  const data = await get(base);
  const item = data.issue || data.pullRequest || data;
  const comments = (await get(`${base}/comments?limit=100`).catch(() => ({}))).comments || [];
  const parts = [
    crumbs(owner, name, " / ", h("a", { href: `${repoHash(owner, name)}/${kind}?state=${stateOf(item) === "open" ? "open" : "all"}` }, NOUN[kind])),
    h("h1", {}, `#${item.number} ${item.title}`),
    h(
      "p",
      { class: "muted" },
      h("span", { class: `state s-${stateOf(item)}` }, stateOf(item)),
      " ",
      (item.author && item.author.username) || "",
      " · ",
      timeEl(item.createdAt),
      kind === "pulls" ? ` · ${item.head} → ${item.base}` : "",
    ),
    h("pre", { class: "body" }, item.body || ""),
    section(
      "Comments",
      comments.length
        ? h("ul", { class: "list" }, comments.map((c) => h("li", { class: "item" }, h("strong", {}, (c.author && c.author.username) || "?"), " ", timeEl(c.createdAt), h("pre", { class: "body" }, c.body || ""))))
        : h("p", { class: "muted" }, "No comments."),
    ),
  ];
  if (kind === "pulls") {
    const files = (await get(`${base}/files`).catch(() => ({}))).files || [];
    parts.push(section(`Files changed (${files.length})`, diffFiles(files)));
  }
  mount(...parts);
}
