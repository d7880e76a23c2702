// A branch's commits, one page at a time, and one commit with its diff.
import { get, repoPath } from "./api.js";
import { h, mount, timeEl } from "./dom.js";
import { PAGE, crumbs, diffFiles, pageOf, pager, q, repoHash, section } from "./views.js";

const plural = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;
const firstLine = (message) => String(message || "").split("\n")[0];
const commitHash = (owner, name, oid) => `${repoHash(owner, name)}/commit/${q(oid)}`;

// A select of the branches; choosing one opens `href(branch)`.
export function branchPicker(branches, current, href) {
  const names = branches.map((b) => b.name);
  if (!names.includes(current)) names.unshift(current);
  const select = h(
    "select",
    { id: "branch", "aria-label": "Branch" },
    names.map((n) => h("option", { value: n, selected: n === current }, n)),
  );
  select.addEventListener("change", () => {
    location.hash = href(select.value);
  });
  return h("label", { class: "picker" }, "Branch ", select);
}

export function commitList(commits, owner, name) {
  return h(
    "ul",
    { class: "list", id: "commits" },
    commits.map((c) =>
      h(
        "li",
        { class: "item" },
        h("a", { href: commitHash(owner, name, c.oid), class: "mono" }, String(c.oid).slice(0, 7)),
        " ",
        h("span", { class: "msg" }, firstLine(c.message)),
        " ",
        h("span", { class: "muted" }, (c.author && c.author.name) || ""),
        " ",
        timeEl((c.author && c.author.date) || new Date(c.timestamp).toISOString()),
      ),
    ),
  );
}

export async function showCommits(owner, name, branch, params) {
  const base = repoPath(owner, name);
  const repo = (await get(base)).repo;
  branch = branch || repo.defaultBranch || "main";
  const page = pageOf(params);
  const [data, branches] = await Promise.all([
    get(`${base}/commits?branch=${q(branch)}&limit=${PAGE}&skip=${(page - 1) * PAGE}`),
    get(`${base}/branches?limit=100`).catch(() => ({})),
  ]);
  const here = (b) => `${repoHash(owner, name)}/commits/${q(b)}`;
  mount(
    crumbs(owner, name),
    h("h1", {}, "Commits"),
    branchPicker(branches.branches || [], branch, here),
    data.commits.length ? commitList(data.commits, owner, name) : h("p", { class: "muted" }, "No commits."),
    pager(page, data.hasMore, (n) => `${here(branch)}?page=${n}`),
  );
}

export async function showCommit(owner, name, oid) {
  const data = await get(`${repoPath(owner, name)}/commits/${q(oid)}/diff`);
  const c = data.commit;
  const [title, ...rest] = String(c.message || "").split("\n");
  const stats = data.stats || {};
  mount(
    crumbs(owner, name, " / ", h("a", { href: `${repoHash(owner, name)}/commits` }, "commits")),
    h("h1", { id: "commit-title" }, title),
    rest.join("\n").trim() ? h("pre", { class: "body" }, rest.join("\n").trim()) : null,
    h(
      "p",
      { class: "muted" },
      h("strong", {}, c.author.name),
      " committed ",
      timeEl(c.author.date),
      " · ",
      h("code", { id: "oid" }, c.oid),
      c.parents.length ? " · parent " : "",
      c.parents.map((p, i) => [i ? ", " : "", h("a", { href: commitHash(owner, name, p), class: "mono" }, p.slice(0, 7))]),
    ),
    section(
      `${plural(stats.filesChanged ?? data.files.length, "file")} changed, +${stats.additions ?? 0} −${stats.deletions ?? 0}`,
      diffFiles(data.files),
      data.truncated ? h("p", { class: "muted" }, "Some files were left out: the diff is too large.") : null,
    ),
  );
}
