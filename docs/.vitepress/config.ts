// The documentation site: `pnpm run docs` serves it, `pnpm docs:build` builds it into
// docs/.vitepress/dist and fails on a link to a page that does not exist. Everything it
// serves comes from this repository: the default theme's font is bundled, search is local.
import { defineConfig } from "vitepress";

export default defineConfig({
  title: "Flotilla",
  description: "A deployment control plane: desired state in a database, streamed to one agent per region.",
  // page.md is served as /page: the same path the pages link each other by, without the suffix.
  cleanUrls: true,
  themeConfig: {
    search: { provider: "local" },
    outline: { level: [2, 3] },
    nav: [
      { text: "Getting started", link: "/getting-started" },
      { text: "Concepts", link: "/concepts/desired-state" },
      { text: "Guides", link: "/guides/cli" },
      { text: "Reference", link: "/reference/" },
      { text: "Operations", link: "/operations/runbooks" },
    ],
    sidebar: [
      {
        text: "Introduction",
        items: [
          { text: "What Flotilla is", link: "/" },
          { text: "Getting started", link: "/getting-started" },
        ],
      },
      {
        text: "Concepts",
        items: [
          { text: "Desired state", link: "/concepts/desired-state" },
          { text: "Versions", link: "/concepts/versions" },
          { text: "The streams", link: "/concepts/streams" },
          { text: "Status", link: "/concepts/status" },
          { text: "Rollouts", link: "/concepts/rollouts" },
          { text: "Rollout analysis", link: "/rollout-analysis" },
          { text: "Secrets", link: "/concepts/secrets" },
          { text: "Operators and audit", link: "/concepts/operators" },
          { text: "Projects and authorization", link: "/concepts/projects" },
          { text: "Architecture", link: "/architecture" },
          { text: "Ownership and status in depth", link: "/ownership-and-status" },
        ],
      },
      {
        text: "How-to guides",
        items: [
          { text: "The CLI", link: "/guides/cli" },
          { text: "The web console", link: "/guides/console" },
          { text: "The API with buf curl", link: "/guides/api" },
          { text: "A real cluster", link: "/guides/real-cluster" },
          { text: "A real Kubernetes: flotilla-kube", link: "/guides/real-kubernetes" },
          { text: "TLS and agent identity", link: "/guides/tls" },
          { text: "Single sign-on", link: "/guides/sso" },
          { text: "High availability", link: "/guides/high-availability" },
          { text: "Upgrading", link: "/guides/upgrading" },
          { text: "Monitoring", link: "/guides/monitoring" },
          { text: "Notifications", link: "/guides/notifications" },
          { text: "Backup and restore", link: "/guides/backup-restore" },
        ],
      },
      {
        text: "Reference",
        items: [
          { text: "Overview", link: "/reference/" },
          { text: "ctrl", link: "/reference/ctrl" },
          { text: "The agent", link: "/reference/agent" },
          { text: "The Kubernetes emulator", link: "/reference/emulator" },
          { text: "The flotilla CLI", link: "/reference/cli" },
          { text: "Manifests", link: "/reference/manifests" },
          { text: "The protocol", link: "/reference/protocol" },
          { text: "Metrics", link: "/reference/metrics" },
          { text: "Benchmarks", link: "/benchmarks" },
          { text: "Emulator differences", link: "/emulator-differences" },
        ],
      },
      {
        text: "Operations",
        items: [
          { text: "Running ctrl", link: "/operations/ctrl" },
          { text: "Running the agent", link: "/operations/agent" },
          { text: "Alert runbooks", link: "/operations/runbooks" },
          { text: "Development", link: "/development" },
        ],
      },
    ],
  },
});
