// The console's shell: sign-in, navigation (hash routes, so every view has a URL), the
// reconnecting banner, and the live fleet the views read.
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { html } from "htm/preact";
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, emptyFleet, followFleet, isSignedOut, listDeployments, problem, ssoSession, ssoSignOut, token, type Fleet, type Session } from "./api.ts";
import { Time } from "./format.ts";
import { RolloutsView } from "./rollouts.ts";
import { NotificationsView } from "./notifications.ts";
import { AuditView, DeploymentDetail, DeploymentsView, FleetView, NetworkPoliciesView, SentinelsView, SignIn } from "./views.ts";

const ROUTES = [
  ["#/fleet", "Fleet"],
  ["#/deployments", "Deployments"],
  ["#/rollouts", "Rollouts"],
  ["#/sentinels", "Sentinels"],
  ["#/networkpolicies", "Network policies"],
  ["#/audit", "Audit"],
  ["#/notifications", "Notifications"],
] as const;

function useRoute(): string {
  const [route, setRoute] = useState(location.hash || "#/fleet");
  useEffect(() => {
    const onChange = () => setRoute(location.hash || "#/fleet");
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

function App() {
  const [session, setSession] = useState<Session | undefined>();
  const [signedOut, setSignedOut] = useState<string | undefined>();
  const [sso, setSso] = useState(false);
  const [fleet, setFleet] = useState<Fleet>(emptyFleet);
  const [, setTick] = useState(0);
  const route = useRoute();

  const signOut = (why?: string) => {
    token.clear();
    void ssoSignOut();
    setSession(undefined);
    setSignedOut(why);
  };
  const signIn = async () => {
    try {
      const me = await api.operators.whoAmI({});
      if (me.actor.startsWith("agent:")) return signOut("An agent token cannot sign in to the console: use an operator token.");
      setSession({ actor: me.actor, role: me.role, projectRoles: new Map(me.projectRoles.map((p) => [p.project, p.role])) });
      setSignedOut(undefined);
    } catch (error) {
      signOut(isSignedOut(error) ? "The token was refused (unknown, expired or revoked)." : problem(error));
    }
  };
  useEffect(() => {
    if (token.get()) {
      void signIn();
      return;
    }
    void ssoSession().then(
      (s) => {
        setSso(s.available);
        if (s.subject) void signIn();
      },
      () => undefined,
    );
  }, []);
  useEffect(() => {
    if (!session) return;
    const stop = new AbortController();
    const live = emptyFleet();
    setFleet(live);
    void (async () => {
      try {
        // The list carries each deployment's status too: the view renders from its first
        // page on, before the status stream's own snapshot arrives.
        await listDeployments((page) => {
          for (const d of page) {
            live.deployments.set(d.id, d);
            live.statuses.set(d.id, d.status);
            if (d.rollout) live.rollouts.set(d.id, d.rollout);
          }
          live.specs++;
          setTick((n) => n + 1);
        });
      } catch (error) {
        if (isSignedOut(error)) return signOut("The token was refused (expired or revoked).");
      }
      await followFleet(
        live,
        () => setTick((n) => n + 1),
        stop.signal,
        () => signOut("The token was refused (expired or revoked)."),
      );
    })();
    return () => stop.abort();
  }, [session]);
  // Ages ("12s ago") move on by themselves.
  useEffect(() => {
    const timer = setInterval(() => setTick((n) => n + 1), 5000);
    return () => clearInterval(timer);
  }, []);

  if (!session)
    return html`<${SignIn}
      reason=${signedOut}
      sso=${sso}
      onSignIn=${(t: string) => {
        token.set(t);
        void signIn();
      }}
    />`;
  const detail = /^#\/deployments\/([a-z0-9-]+)$/.exec(route)?.[1];
  const rollouts = /^#\/rollouts(?:\?deployment=([a-z0-9-]+))?$/.exec(route);
  const view = detail
    ? html`<${DeploymentDetail} id=${detail} fleet=${fleet} session=${session} />`
    : rollouts
      ? html`<${RolloutsView} fleet=${fleet} session=${session} deployment=${rollouts[1] ?? ""} />`
      : route === "#/deployments"
        ? html`<${DeploymentsView} fleet=${fleet} />`
        : route === "#/sentinels"
          ? html`<${SentinelsView} />`
          : route === "#/networkpolicies"
            ? html`<${NetworkPoliciesView} />`
            : route === "#/audit"
              ? html`<${AuditView} />`
              : route === "#/notifications"
                ? html`<${NotificationsView} />`
                : html`<${FleetView} fleet=${fleet} />`;
  return html`<header>
      <span class="brand">Flotilla</span>
      <nav aria-label="Views">
        <ul>${ROUTES.map(([href, label]) => html`<li><a href=${href} aria-current=${route.startsWith(href) ? "page" : undefined}>${label}</a></li>`)}</ul>
      </nav>
      <span class="who">${session.actor} (${session.role === Role.UNSPECIFIED ? "roles from projects" : Role[session.role]!.toLowerCase()})</span>
      <button type="button" onClick=${() => signOut("Signed out.")}>Sign out</button>
    </header>
    ${
      fleet.reconnecting &&
      html`<div class="banner" role="status">Reconnecting to ctrl… the data shown is as of <${Time} ms=${fleet.reconnecting.since} /> (${fleet.reconnecting.why})</div>`
    }
    <main>${view}</main>`;
}

render(html`<${App} />`, document.getElementById("app")!);
