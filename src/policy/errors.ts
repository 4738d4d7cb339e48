/**
 * Why a policy was refused: one line naming the file and the problem, as start-up prints
 * it and as a refused reload logs it. The only error the policy layer throws.
 */
export class PolicyError extends Error {
  /** the file (or POLICY_PATH itself) the problem is in */
  readonly file: string;
  readonly problem: string;
  constructor(file: string, problem: string) {
    // One line, whatever the problem text carries (YAML messages quote source lines).
    const line = problem.split("\n", 1)[0]!.trim();
    super(`${file}: ${line}`);
    this.name = "PolicyError";
    this.file = file;
    this.problem = line;
  }
}
