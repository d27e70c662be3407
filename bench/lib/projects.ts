// Projects for the benchmarks of single sign-on's cost: project p<i> holds the namespaces
// p<i>-* in every region and grants one role to an operator account (its static token) and to
// a group (an ID token's, g<i> unless told), so both credentials reach the same resources.
import { OperatorService, Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { ProjectService } from "@flotilla/proto/ctrl/v1/project_pb.js";
import { serviceClient } from "./clients.ts";

export const projectName = (i: number) => `p${i}`;
export const projectGroup = (i: number) => `g${i}`;
/** A namespace of project p<i>. */
export const projectNamespace = (i: number) => `p${i}-ns`;

/**
 * Creates operator `operator` with no fleet-wide role and `count` projects granting it `role`,
 * and the same role to a group (`groupOf(i)`, by default each project's own); returns its static token.
 */
export async function createProjects(baseUrl: string, count: number, role: Role, operator: string, groupOf = projectGroup): Promise<string> {
  const { token } = await serviceClient(OperatorService, baseUrl).createOperator({ name: operator });
  const projects = serviceClient(ProjectService, baseUrl);
  for (let i = 0; i < count; i++) {
    await projects.createProject({
      project: {
        name: projectName(i),
        namespaces: [`p${i}-*`],
        regions: { names: ["*"] },
        roles: [{ role, operators: [operator], groups: [groupOf(i)] }],
      },
    });
  }
  return token;
}
