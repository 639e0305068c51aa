// Tessera's Node binding: the C API (include/tessera.h) with @fugood/llama.node's names and shapes
// where Tessera implements them. Options not listed here are refused by name (an Error with code
// 'ERR_TESSERA_UNSUPPORTED_OPTION'), never ignored; an option set to undefined counts as absent.
// Errors of the C API carry its message and a code such as 'TESSERA_IO_ERROR'.

export type LlamaModelOptions = {
  /** Path of the GGUF file. */
  model: string
  /** KV cells (0 or absent: the model's training context, at most 4096). */
  n_ctx?: number
  /** Tokens per evaluated micro-batch (default 512). */
  n_batch?: number
  /** CPU threads (0 or absent: all cores). */
  n_threads?: number
  /** The last N layers (and the output when N > layers) on the device. */
  n_gpu_layers?: number
  /** One device name from getBackendDevicesInfo() (more than one is refused). */
  devices?: string[]
  /** An embedding context: embedding() works, completion() does not. */
  embedding?: boolean
  /** Map the file (default true) or read it into memory. */
  use_mmap?: boolean
}

export type ChatMessage = {
  role: string
  /** A string, or OpenAI-style parts (passed to the template as they are). */
  content: string | Array<{ type: 'text'; text: string }>
  [key: string]: unknown
}

export type LlamaCompletionOptions = {
  /** Text, tokenized with BOS; control tokens written in it are parsed. Either this or messages. */
  prompt?: string
  /** Rendered through the model's chat template (or chat_template) by tessera_chat_tokenize. */
  messages?: ChatMessage[]
  /** A Jinja chat template for messages, instead of the model's. */
  chat_template?: string
  /** Only true is accepted (templates are always Jinja). */
  jinja?: boolean
  /** Tokens to generate at most; -1 or absent: until an end of generation or the context is full. */
  n_predict?: number
  /** Default 0.8; <= 0: greedy. */
  temperature?: number
  /** Default 40; <= 0: off. */
  top_k?: number
  /** Default 0.95; >= 1: off. */
  top_p?: number
  /** Default 0.05; 0: off. */
  min_p?: number
  /** Repetition penalty, default 1 (off). */
  penalty_repeat?: number
  /** Tokens the penalties look back at, default 64; -1: the context size. */
  penalty_last_n?: number
  penalty_present?: number
  penalty_freq?: number
  /** -1 or absent: a random seed. */
  seed?: number
  /** Stop strings (not part of the text). */
  stop?: string[]
  ignore_eos?: boolean
  /** Constrain the text: a GBNF grammar, a JSON schema (object or text), or OpenAI's response_format (one of the three). */
  grammar?: string
  json_schema?: object | string
  response_format?: { type: 'text' | 'json_object' | 'json_schema'; json_schema?: { name?: string; schema?: object; strict?: boolean } }
}

export type LlamaCompletionToken = {
  /** A settled piece of text: whole UTF-8 characters, stop strings held back until they cannot match. */
  token: string
}

export type LlamaCompletionResult = {
  /** The generated text: every onToken piece joined. */
  text: string
  tokens_predicted: number
  /** The prompt's tokens (cached ones included). */
  tokens_evaluated: number
  /** The prompt's tokens reused from the context (a common prefix with the last completion). */
  tokens_cached: number
  /** Always false: a prompt longer than the context is an error, not truncated. */
  truncated: boolean
  context_full: boolean
  stopped_eos: boolean
  stopped_word: boolean
  stopped_limit: boolean
  interrupted: boolean
  timings: {
    cache_n: number
    /** Prompt tokens evaluated (tokens_evaluated - tokens_cached). */
    prompt_n: number
    prompt_ms: number
    prompt_per_token_ms: number
    prompt_per_second: number
    predicted_n: number
    predicted_ms: number
    predicted_per_token_ms: number
    predicted_per_second: number
  }
}

export type TokenizeResult = {
  /** Without BOS/EOS; control tokens written in the text are parsed. */
  tokens: Int32Array
}

export type EmbeddingResult = {
  /** Mean-pooled, L2-normalized (unit length). */
  embedding: Float32Array
}

export type BenchResult = {
  nKvMax: number
  nBatch: number
  nUBatch: number
  flashAttn: number
  isPpShared: boolean
  nGpuLayers: number
  nThreads: number
  nThreadsBatch: number
  pp: number
  tg: number
  pl: number
  nKv: number
  /** Prompt processing, ms (mean of the repetitions). */
  tPp: number
  speedPp: number
  /** Generation, ms (mean of the repetitions). */
  tTg: number
  speedTg: number
  t: number
  speed: number
}

export type BackendDeviceInfo = {
  /** "CPU", "OpenCL", "Host". */
  backend: string
  type: 'cpu' | 'gpu' | 'accel'
  /** What LlamaModelOptions.devices takes: "CPU", "OpenCL0", ... */
  deviceName: string
  maxMemorySize: number
  metadata?: { description: string; freeMemorySize: number }
}

export type ModelInfo = {
  desc: string
  architecture: string
  nVocab: number
  nEmbd: number
  nLayer: number
  nCtxTrain: number
  nCtx: number
  /** Bytes of weights. */
  size: number
  hasChatTemplate: boolean
}

/**
 * One model and one context. Calls that use the context run one at a time in call order, each on
 * a worker thread; different contexts run at the same time.
 */
export declare class LlamaContext {
  private constructor()
  completion(
    options: LlamaCompletionOptions,
    onToken?: (token: LlamaCompletionToken) => void,
  ): Promise<LlamaCompletionResult>
  /** Stops the running (and queued) completions: they resolve with interrupted: true. */
  stopCompletion(): void
  tokenize(text: string): Promise<TokenizeResult>
  detokenize(tokens: number[] | Int32Array): Promise<string>
  /** The messages rendered through `template` (or the model's own); add_generation_prompt defaults to true. */
  getFormattedChat(
    messages: ChatMessage[],
    template?: string | null,
    params?: { add_generation_prompt?: boolean; jinja?: boolean },
  ): string
  /** Needs loadModel({embedding: true}). */
  embedding(text: string, params?: { embd_normalize?: 2 }): Promise<EmbeddingResult>
  /** Sequence 0 as the last completion left it (prompt and generated tokens) to a file. */
  saveSession(path: string): Promise<void>
  /** Reads a saved session: the next completion reuses it as its prompt's prefix. */
  loadSession(path: string): Promise<void>
  bench(pp: number, tg: number, pl: number, nr: number): Promise<BenchResult>
  getModelInfo(): ModelInfo
  /**
   * Cancels the running completion, rejects the calls still queued, then frees the model and the
   * context. Every later call rejects (or throws) with code 'ERR_TESSERA_RELEASED'.
   */
  release(): Promise<void>
  static getBackendDevicesInfo(): BackendDeviceInfo[]
}

export declare function loadModel(
  options: LlamaModelOptions,
  onProgress?: (fraction: number) => void,
): Promise<LlamaContext>

export declare function getBackendDevicesInfo(): Promise<BackendDeviceInfo[]>

/** libtessera's version. */
export declare const version: string
