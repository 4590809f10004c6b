// brigade serve driven by the official OpenAI client (npm `openai`), as an
// application would use it: chat with and without streaming, completions,
// a tool-call round trip, model listing, errors, an aborted stream.
// Run by tests/cli_serve.sh with BASE_URL, API_KEY and NODE_PATH set.
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.NODE_PATH, 'x.js'));
const OpenAI = require('openai').default ?? require('openai');

const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: process.env.API_KEY, maxRetries: 0 });
let passed = 0, failed = 0;
function check(cond, what) {
    if (cond) passed++;
    else { failed++; console.error(`FAIL ${what}`); }
}
async function test(name, fn) {
    try { await fn(); }
    catch (e) { failed++; console.error(`FAIL ${name}: ${e.stack || e}`); }
}

await test('models', async () => {
    const models = await client.models.list();
    check(models.data.length === 1 && typeof models.data[0].id === 'string', 'models.list');
});

await test('chat', async () => {
    const r = await client.chat.completions.create({
        model: 'any', max_tokens: 6, temperature: 0,
        messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hi' }],
    });
    check(r.object === 'chat.completion', 'chat object');
    check(typeof r.choices[0].message.content === 'string', 'chat content');
    check(r.choices[0].finish_reason === 'length', `chat finish_reason ${r.choices[0].finish_reason}`);
    check(r.usage.completion_tokens === 6 && r.usage.prompt_tokens > 0, 'chat usage');
});

await test('chat stream', async () => {
    const stream = await client.chat.completions.create({
        model: 'any', max_tokens: 5, stream: true, stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'Count' }],
    });
    let text = '', finish = null, usage = null, chunks = 0;
    for await (const c of stream) {
        chunks++;
        if (c.usage) usage = c.usage;
        const ch = c.choices[0];
        if (!ch) continue;
        if (ch.delta?.content) text += ch.delta.content;
        if (ch.finish_reason) finish = ch.finish_reason;
    }
    check(chunks >= 3, `stream chunks ${chunks}`);
    check(finish === 'length', `stream finish ${finish}`);
    check(usage && usage.completion_tokens === 5, 'stream usage');
    check(typeof text === 'string', 'stream text');
});

await test('completions', async () => {
    const r = await client.completions.create({ model: 'any', prompt: 'Once upon a time', max_tokens: 4 });
    check(r.object === 'text_completion' && typeof r.choices[0].text === 'string', 'completion');
    check(r.usage.completion_tokens === 4, 'completion usage');
    const s = await client.completions.create({ model: 'any', prompt: 'Once', max_tokens: 3, stream: true });
    let n = 0;
    for await (const c of s) if (c.choices[0]?.text !== undefined) n++;
    check(n >= 1, 'completion stream');
});

await test('tools', async () => {
    const tools = [{
        type: 'function',
        function: {
            name: 'get_weather', description: 'Weather in a city',
            parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        },
    }];
    const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const first = await client.chat.completions.create({ model: 'any', max_tokens: 8, tools, tool_choice: 'auto', messages });
    const msg = first.choices[0].message;
    check(['stop', 'length', 'tool_calls'].includes(first.choices[0].finish_reason), 'tools: finish_reason');
    // The round trip: whatever the random model said, the client sends a
    // call and its result back; the server renders them into the prompt.
    const call = msg.tool_calls?.[0] ?? {
        id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
    };
    messages.push({ role: 'assistant', content: msg.content ?? '', tool_calls: [call] });
    messages.push({ role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' });
    const second = await client.chat.completions.create({ model: 'any', max_tokens: 4, tools, messages });
    check(second.usage.prompt_tokens > first.usage.prompt_tokens, 'tools: the result is in the prompt');
    check(second.usage.prompt_tokens_details.cached_tokens > 0, 'tools: the first turn is reused');
});

await test('errors', async () => {
    try {
        await client.chat.completions.create({ model: 'any', messages: [{ role: 'user', content: 'x' }], max_tokens: -1 });
        check(false, 'negative max_tokens accepted');
    } catch (e) {
        check(e instanceof OpenAI.BadRequestError && e.status === 400, `400 expected, got ${e.status}`);
    }
    const bad = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: 'wrong', maxRetries: 0 });
    try {
        await bad.models.list();
        check(false, 'wrong key accepted');
    } catch (e) {
        check(e instanceof OpenAI.AuthenticationError && e.status === 401, `401 expected, got ${e.status}`);
    }
});

await test('abort', async () => {
    const ac = new AbortController();
    const stream = await client.chat.completions.create(
        { model: 'any', max_tokens: 100000, stream: true, messages: [{ role: 'user', content: 'Talk' }] },
        { signal: ac.signal });
    let n = 0;
    try {
        for await (const c of stream) { if (++n === 3) ac.abort(); }
    } catch (e) { /* the abort */ }
    check(n >= 3, 'abort: chunks before the abort');
    const r = await client.chat.completions.create({ model: 'any', max_tokens: 2, messages: [{ role: 'user', content: 'Still there?' }] });
    check(r.usage.completion_tokens === 2, 'abort: the server still answers');
});

console.log(`serve_openai: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
