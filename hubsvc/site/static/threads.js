// Issues and pull requests: a list per state, one page at a time, and the form that
// opens an issue (one issue or pull request is thread.js).
import { get, post, repoPath } from "./api.js";
import { h, mount, timeEl } from "./dom.js";
import { PAGE, crumbs, labelChip, pageOf, pager, q, repoHash, stateTabs, words } from "./views.js";

export { showThread } from "./thread.js";

const STATES = { issues: ["open", "closed", "all"], pulls: ["open", "closed", "merged", "all"] };
const NOUN = { issues: "issues", pulls: "pull requests" };

export function stateOf(item) {
  if (item.merged) return "merged";
  return item.state;
}

// One line per issue or pull request: its number and title, state, labels, author and age.
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
        (it.labels || []).length ? [" ", (it.labels || []).map((l) => labelChip(l, ((it.labelObjects || []).find((o) => o.name === l) || {}).color))] : null,
        " ",
        h("span", { class: "muted" }, (it.author && it.author.username) || ""),
        " ",
        timeEl(it.createdAt),
        it.commentCount ? h("span", { class: "muted count", title: "comments" }, ` 💬 ${it.commentCount}`) : null,
      ),
    ),
  );
}

export async function showThreads(owner, name, kind, params, me) {
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
    h(
      "div",
      { class: "title-row" },
      h("h1", {}, kind === "pulls" ? "Pull requests" : "Issues"),
      kind === "issues" && me ? h("a", { class: "button primary", id: "new-issue", href: `${base}/new` }, "New issue") : null,
    ),
    stateTabs(base, states, state),
    threadList(items, owner, name, kind, `No ${state === "all" ? "" : `${state} `}${NOUN[kind]}.`),
    pager(page, data.hasMore, (n) => `${base}?state=${state}&page=${n}`),
  );
}

// POST …/issues {title, body, labels}: what any client sends; then the new issue's page.
export function showNewIssue(owner, name) {
  const title = h("input", { id: "issue-title", name: "title", required: true, maxlength: 256, autocomplete: "off" });
  const text = h("textarea", { id: "issue-body", name: "body", rows: 8, placeholder: "Markdown: #12 and @name link" });
  const labels = h("input", { id: "issue-labels", name: "labels", placeholder: "bug, ui", autocomplete: "off" });
  const message = h("p", { class: "error", role: "alert", id: "issue-error" });
  const submit = h("button", { type: "submit", class: "primary", id: "submit-issue" }, "Open issue");
  const form = h(
    "form",
    { class: "card stack", id: "new-issue-form" },
    h("label", { for: "issue-title" }, "Title"),
    title,
    h("label", { for: "issue-body" }, "Description"),
    text,
    h("label", { for: "issue-labels" }, "Labels (comma-separated)"),
    labels,
    h("div", { class: "actions" }, submit),
    message,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    submit.disabled = true;
    message.textContent = "";
    try {
      const made = await post(`${repoPath(owner, name)}/issues`, {
        title: title.value.trim(),
        body: text.value,
        labels: words(labels.value),
      });
      location.hash = `${repoHash(owner, name)}/issues/${made.issue.number}`;
    } catch (err) {
      message.textContent = err.message || "The issue was not opened.";
      submit.disabled = false;
    }
  });
  mount(crumbs(owner, name, " / ", h("a", { href: `${repoHash(owner, name)}/issues` }, "issues")), h("h1", {}, "New issue"), form);
  title.focus();
}


