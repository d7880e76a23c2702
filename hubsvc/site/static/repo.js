// A repository (files, branches, commits, issues, pull requests), the user's
// repositories, and search: all text nodes, from the public API.
import { get, post, repoPath } from "./api.js";
import { h, mount } from "./dom.js";
import { branchPicker, commitList, showCommit, showCommits } from "./history.js";
import { showReleases } from "./planning.js";
import { showNewIssue, showThread, showThreads, threadList } from "./threads.js";
import { crumbs, markdown, q, repoHash, section, userLink } from "./views.js";

function repoItem(repo) {
  const owner = (repo.owner && repo.owner.username) || String(repo.fullName || "").split("/")[0];
  return h(
    "li",
    { class: "item" },
    h("a", { href: repoHash(owner, repo.name), class: "repo" }, `${owner}/${repo.name}`),
    repo.private ? h("span", { class: "badge" }, "private") : null,
    h("span", { class: "muted" }, ` ★ ${repo.starCount ?? 0}`),
    repo.description ? h("p", { class: "desc" }, repo.description) : null,
  );
}

export async function showRepos(me) {
  const [own, stars] = await Promise.all([
    get(`/api/users/${q(me.username)}/repositories?limit=100`),
    get(`/api/users/${q(me.username)}/starred?limit=100`),
  ]);
  const list = (repos, id) =>
    repos.length ? h("ul", { class: "list", id }, repos.map(repoItem)) : h("p", { class: "muted", id }, "None yet.");
  mount(
    h("h1", {}, "Your repositories"),
    list(own.repositories || [], "own"),
    h("h1", {}, "Starred"),
    list(stars.repositories || [], "starred"),
  );
}

export async function showSearch(text, type) {
  const input = h("input", { id: "q", type: "search", value: text, placeholder: "Search", "aria-label": "Search" });
  const kind = h(
    "select",
    { id: "kind", "aria-label": "What to search" },
    ["repositories", "issues", "pulls", "users"].map((t) => h("option", { value: t, selected: t === type }, t)),
  );
  const form = h("form", { class: "search" }, input, kind, h("button", { type: "submit" }, "Search"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = `#/search/${q(input.value)}/${kind.value}`;
  });
  const results = h("ul", { class: "list", id: "results" });
  mount(h("h1", {}, "Search"), form, results);
  if (!text) return;
  const data = await get(`/api/search?q=${q(text)}&type=${q(type)}&limit=30`);
  for (const r of data.results || []) {
    if (type === "repositories") results.append(repoItem(r));
    else if (type === "users") results.append(h("li", { class: "item" }, r.username, " ", h("span", { class: "muted" }, r.name || "")));
    else {
      const repo = r.repository || {};
      const kindPath = type === "pulls" ? "pulls" : "issues";
      results.append(
        h(
          "li",
          { class: "item" },
          h("a", { href: `${repoHash(repo.owner, repo.name)}/${kindPath}/${r.number}` }, `#${r.number} ${r.title}`),
          h("span", { class: "muted" }, ` ${repo.owner}/${repo.name}`),
        ),
      );
    }
  }
  if (!results.children.length) results.append(h("li", { class: "muted" }, "Nothing found."));
}


async function showFile(owner, name, branch, path) {
  const file = (await get(`${repoPath(owner, name)}/file?branch=${q(branch)}&path=${q(path)}`)).file;
  let body = file.content;
  if (file.truncated) body = `(${file.size} bytes: too large to show)`;
  else if (file.isBinary) body = `(binary file, ${file.size} bytes)`;
  mount(crumbs(owner, name, ` / ${branch} / ${path}`), h("pre", { class: "file", id: "file" }, body));
}

// A card's title with a link to the whole list.
const more = (title, href, label) => h("span", { class: "more-link" }, title, " ", h("a", { href }, label));

// The clone URLs the repository object carries (sshUrl is null with the SSH port off).
function cloneBox(repo) {
  const urls = [["HTTPS", repo.cloneUrl], ["SSH", repo.sshUrl]].filter(([, url]) => url);
  const field = h("input", { id: "clone-url", readonly: true, value: urls[0][1], "aria-label": "Clone URL", spellcheck: "false" });
  const tabs = urls.map(([label, url], i) => {
    const tab = h("button", { type: "button", class: i === 0 ? "tab current" : "tab", id: `clone-${label.toLowerCase()}`, "aria-pressed": String(i === 0) }, label);
    tab.addEventListener("click", () => {
      field.value = url;
      for (const other of tab.parentNode.querySelectorAll(".tab")) {
        other.classList.toggle("current", other === tab);
        other.setAttribute("aria-pressed", String(other === tab));
      }
    });
    return tab;
  });
  const copy = h("button", { type: "button", id: "copy-clone" }, "Copy");
  copy.addEventListener("click", async () => {
    field.select();
    try {
      await navigator.clipboard.writeText(field.value);
      copy.textContent = "Copied";
    } catch (_) {
      copy.textContent = "Select + copy";
    }
    setTimeout(() => (copy.textContent = "Copy"), 1500);
  });
  field.addEventListener("focus", () => field.select());
  return h("div", { class: "clone", id: "clone" }, h("span", { class: "clone-tabs" }, h("strong", {}, "Clone "), tabs), h("span", { class: "clone-field" }, field, copy));
}

async function showOverview(owner, name, rest, me) {
  const base = repoPath(owner, name);
  const repo = (await get(base)).repo;
  const branch = rest[0] === "tree" && rest[1] ? rest[1] : repo.defaultBranch || "main";
  const dir = rest[0] === "tree" ? rest.slice(2).join("/") : "";
  const [tree, branches, commits, issues, pulls, readme] = await Promise.all(
    [
      `${base}/tree?branch=${q(branch)}&path=${q(dir)}`,
      `${base}/branches?limit=100`,
      `${base}/commits?branch=${q(branch)}&limit=10`,
      `${base}/issues?state=open&limit=10`,
      `${base}/pulls?state=open&limit=10`,
      `${base}/readme?branch=${q(branch)}`,
    ].map((p) => get(p).catch(() => ({}))),
  );
  const home = repoHash(owner, name);
  const atBranch = (b) => `${home}/tree/${q(b)}`;
  const files = tree.files || [];
  const link = (f) =>
    h(
      "a",
      { href: `${home}/${f.type === "dir" ? "tree" : "blob"}/${q(branch)}/${f.path.split("/").map(q).join("/")}` },
      f.type === "dir" ? `${f.name}/` : f.name,
    );
  const up = dir ? h("li", {}, h("a", { href: `${atBranch(branch)}/${dir.split("/").slice(0, -1).map(q).join("/")}` }, "../")) : null;
  mount(
    h(
      "h1",
      { class: "repo-title" },
      h("a", { href: `#/u/${q(owner)}` }, owner),
      " / ",
      h("strong", {}, name),
      repo.private ? h("span", { class: "badge" }, "private") : null,
      repo.fork && repo.parent ? h("span", { class: "badge" }, `fork of ${repo.parent.owner}/${repo.parent.name}`) : null,
    ),
    repo.description ? h("p", { class: "desc" }, repo.description) : null,
    h(
      "nav",
      { class: "repo-tabs", "aria-label": "Repository" },
      h("a", { href: home, class: "current" }, "Code"),
      h("a", { href: `${home}/issues` }, "Issues"),
      h("a", { href: `${home}/pulls` }, "Pull requests"),
      h("a", { href: `${home}/commits/${q(branch)}` }, "Commits"),
      h("a", { href: `${home}/releases` }, "Releases"),
      me ? h("a", { href: `${home}/issues/new`, class: "button primary", id: "repo-new-issue" }, "New issue") : null,
    ),
    h(
      "div",
      { class: "toolbar" },
      branchPicker(branches.branches || [], branch, atBranch),
      dir ? h("span", { class: "mono" }, `/${dir}`) : null,
      cloneBox(repo),
    ),
    h(
      "div",
      { class: "grid" },
      section(
        "Files",
        files.length || up
          ? h("ul", { class: "list mono", id: "tree" }, up, files.map((f) => h("li", {}, link(f))))
          : h("p", { class: "muted" }, "Empty repository."),
      ),
      section(
        "Branches",
        h(
          "ul",
          { class: "list mono", id: "branches" },
          (branches.branches || []).map((b) =>
            h("li", {}, h("a", { href: atBranch(b.name), class: b.name === branch ? "current" : "" }, b.name), b.isDefault ? h("span", { class: "badge" }, "default") : null),
          ),
        ),
      ),
      section(
        more("Recent commits", `${home}/commits/${q(branch)}`, "all →"),
        commitList(commits.commits || [], owner, name),
      ),
      section(
        more("Open issues", `${home}/issues?state=open`, "all →"),
        threadList(issues.issues || [], owner, name, "issues", "No open issues."),
      ),
      section(
        more("Open pull requests", `${home}/pulls?state=open`, "all →"),
        threadList(pulls.pullRequests || [], owner, name, "pulls", "No open pull requests."),
      ),
    ),
    readme.html !== undefined ? section(readme.path, markdown(readme.html, { id: "readme" })) : null,
  );
}

// #/r/owner/name[/tree/branch/dir | /blob/branch/path | /commits[/branch] | /commit/oid |
// /issues[/n] | /pulls[/n]], with ?state= and ?page= for the lists.
export async function showRepo(owner, name, rest, params, me) {
  const [what, arg] = rest;
  if (what === "issues" && arg === "new" && me) return showNewIssue(owner, name);
  if ((what === "issues" || what === "pulls") && arg) return showThread(owner, name, what, arg, me);
  if (what === "issues" || what === "pulls") return showThreads(owner, name, what, params, me);
  if (what === "commits") return showCommits(owner, name, arg, params);
  if (what === "releases") return showReleases(owner, name);
  if (what === "commit" && arg) return showCommit(owner, name, arg);
  if (what === "blob" && arg) return showFile(owner, name, arg, rest.slice(2).join("/"));
  return showOverview(owner, name, rest, me);
}

// #/u/name: a user's profile and public repositories.
export async function showUser(username) {
  const [profile, repos] = await Promise.all([
    get(`/api/users/${q(username)}`),
    get(`/api/users/${q(username)}/repositories?limit=100`).catch(() => ({})),
  ]);
  const user = profile.user || profile;
  const list = repos.repositories || [];
  mount(
    h("h1", {}, user.name || user.username, " ", h("span", { class: "muted" }, user.username)),
    user.bio ? h("p", { class: "desc" }, user.bio) : null,
    h("h2", {}, "Repositories"),
    list.length ? h("ul", { class: "list", id: "user-repos" }, list.map(repoItem)) : h("p", { class: "muted" }, "No repositories yet."),
  );
}

// POST /api/repositories {name, description, visibility, autoInit}; then its page.
export function showNewRepo(me) {
  const name = h("input", { id: "repo-name", name: "name", required: true, maxlength: 100, autocomplete: "off", pattern: "[A-Za-z0-9._-]+" });
  const description = h("input", { id: "repo-description", name: "description", maxlength: 2000 });
  const visibility = h("select", { id: "repo-visibility", name: "visibility" }, h("option", { value: "public" }, "Public: anyone can read it"), h("option", { value: "private" }, "Private: you choose who can"));
  const init = h("input", { id: "repo-init", name: "autoInit", type: "checkbox", checked: true });
  const message = h("p", { class: "error", role: "alert", id: "repo-error" });
  const submit = h("button", { type: "submit", class: "primary", id: "create-repo" }, "Create repository");
  const form = h(
    "form",
    { class: "card narrow", id: "new-repo" },
    h("h1", {}, "New repository"),
    h("label", { for: "repo-name" }, `Name (owner: ${me.username})`),
    name,
    h("label", { for: "repo-description" }, "Description (optional)"),
    description,
    h("label", { for: "repo-visibility" }, "Visibility"),
    visibility,
    h("label", { class: "check-label" }, init, " Start with a README"),
    submit,
    message,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    message.textContent = "";
    submit.disabled = true;
    try {
      const made = await post("/api/repositories", {
        name: name.value.trim(),
        description: description.value,
        visibility: visibility.value,
        autoInit: init.checked,
      });
      location.hash = repoHash(me.username, made.repo.name);
    } catch (err) {
      message.textContent = err.message || "Not created.";
      submit.disabled = false;
    }
  });
  mount(form);
  name.focus();
}


