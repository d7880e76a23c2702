// One event as one line a person reads at a glance, coloured as the chat notices are
// (hubsvc/notify/messages.py: the same colour per type and state).
import { h, timeEl } from "./dom.js";

const repoHash = (r) => `#/r/${encodeURIComponent(r.owner)}/${encodeURIComponent(r.name)}`;

function pushSummary(d) {
  const ref = String(d.ref || "");
  const [kind, ...rest] = ref.startsWith("refs/") ? ref.slice(5).split("/") : ["", ref];
  const name = rest.join("/") || ref;
  const total = d.totalCommits ?? (d.commits || []).length;
  const commits = `${total} new commit${total === 1 ? "" : "s"}`;
  if (kind === "tags") return d.deleted ? `deleted tag ${name}` : `tagged ${name}`;
  if (d.deleted) return `deleted branch ${name}`;
  if (d.created) return `created branch ${name}` + (total ? ` with ${commits}` : "");
  if (d.forced) return `force-pushed ${name} (${commits})`;
  return `pushed ${commits} to ${name}`;
}

const STATUS = { success: "green", failure: "red", error: "red", pending: "yellow" };

// [what was done (text), colour name, link]
export function describe(event) {
  const d = event.data || {};
  const repo = event.repository || {};
  const base = repoHash(repo);
  const action = d.action || "updated";
  if (event.type === "issue" || event.type === "pull_request") {
    const pull = event.type === "pull_request";
    const item = (pull ? d.pullRequest : d.issue) || {};
    const kind = pull ? "pull request" : "issue";
    const what =
      action === "commented" ? `commented on ${kind} #${item.number}` : `${action} ${kind} #${item.number}`;
    let colour = item.state === "open" ? "green" : "red";
    if (pull && (item.merged || item.state === "merged")) colour = "purple";
    const link = Number.isInteger(item.number) ? `${base}/${pull ? "pulls" : "issues"}/${item.number}` : base;
    return [what, String(item.title || ""), colour, link];
  }
  if (event.type === "push") {
    const ref = String(d.ref || "");
    const branch = ref.startsWith("refs/heads/") && !d.deleted ? `/${encodeURIComponent(ref.slice(11))}` : "";
    return [String(d.summary || pushSummary(d)), "", "blue", `${base}/commits${branch}`];
  }
  if (event.type === "star") {
    const added = action === "added";
    return [added ? "starred" : "unstarred", "", added ? "yellow" : "gray", base];
  }
  if (event.type === "fork") {
    const full = (d.forkee && d.forkee.fullName) || "";
    const [o, n] = full.split("/");
    return ["forked", full ? `to ${full}` : "", "fork", o && n ? repoHash({ owner: o, name: n }) : base];
  }
  if (event.type === "status") {
    const sha = String(d.sha || "").slice(0, 7);
    return [`${d.context || "status"}: ${d.state} on ${sha}`, String(d.description || ""), STATUS[d.state] || "gray", base];
  }
  return [event.type, "", "gray", base];
}

export function eventLine(event) {
  const [what, title, colour, link] = describe(event);
  const repo = event.repository || {};
  const who = (event.actor && event.actor.username) || "someone";
  return h(
    "li",
    { class: `event c-${colour}`, "data-id": event.id, "data-type": event.type },
    h("span", { class: "dot", "aria-hidden": "true" }),
    h(
      "span",
      { class: "line" },
      h("strong", { class: "actor" }, who),
      " ",
      h("a", { href: link, class: "what" }, what),
      title ? [" ", h("span", { class: "title" }, title)] : null,
      " in ",
      h("a", { href: repoHash(repo), class: "repo" }, `${repo.owner}/${repo.name}`),
    ),
    timeEl(event.createdAt),
  );
}
