import type { Logger } from "../../../logger.js";

/**
 * A pass over the whole table that runs one at a time (a reconcile, a replica resync): asked
 * while it runs, it runs once more when it ends, however often it was asked meanwhile, as
 * long as `more()` allows. A pass that throws is logged; the next request runs it again.
 */
export class RerunningPass {
  private running: Promise<void> | undefined;
  private again = false;

  constructor(
    private readonly name: string,
    private readonly pass: () => Promise<void>,
    private readonly more: () => boolean,
    private readonly logger: Logger,
  ) {}

  request(): void {
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.pass();
      } while (this.again && this.more());
    })()
      .catch((err: unknown) => this.logger.error({ err: (err as Error).message }, `${this.name} failed`))
      .finally(() => (this.running = undefined));
  }
}
