/**
 * A credential held in a config without ever being printed or saved: `JSON.stringify` and YAML drop
 * it (toJSON → undefined, written as null), `String()` and `console.log` show `[redacted]`. Only
 * `reveal()` gives the value, and only the HTTP client calls it (to set the `X-API-Key` header).
 */
import { inspect } from 'node:util';

export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  /** The credential itself (for the request header only). */
  reveal(): string {
    return this.#value;
  }

  toJSON(): undefined {
    return undefined;
  }

  toString(): string {
    return '[redacted]';
  }

  [inspect.custom](): string {
    return '[redacted]';
  }
}

/**
 * The Tinker API key: `configured` (trainer.apiKey) when set, else `$TINKER_API_KEY`, else none
 * (SkyRL tx and `arbor serve` do not check keys).
 */
export function tinkerApiKey(
  configured: Secret | string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Secret | undefined {
  if (configured instanceof Secret) return configured;
  if (typeof configured === 'string' && configured) return new Secret(configured);
  const fromEnv = env.TINKER_API_KEY;
  return fromEnv ? new Secret(fromEnv) : undefined;
}
