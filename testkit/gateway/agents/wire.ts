/**
 * What the client libraries put on the wire, for the tests: a `fetch` that keeps every request body it
 * sends (parsed JSON) with its bearer key, then sends it with the global fetch unchanged. The agent
 * modules hand it to their client (`fetch` / `configuration.fetch`), the one change they make for the
 * tests; the harness reads `sent` to show how each client wrote back the history it was given.
 */

/** Every request body sent, with the episode key it carried. */
export const sent: Array<{ apiKey: string; url: string; body: Record<string, unknown> }> = [];

/** The global fetch, keeping each JSON body it sends; `input` is loose so every client's fetch option takes it. */
export const recordingFetch = async (input: unknown, init?: RequestInit): Promise<Response> => {
  const url = input instanceof Request ? input.url : String(input);
  const apiKey = (new Headers(init?.headers).get('authorization') ?? '').replace(/^Bearer\s+/i, '');
  if (typeof init?.body === 'string')
    sent.push({ apiKey, url, body: JSON.parse(init.body) as Record<string, unknown> });
  return fetch(input instanceof Request ? input : url, init);
};
