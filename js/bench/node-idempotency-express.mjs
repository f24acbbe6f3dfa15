// A TRANSCRIPTION, for the HTTP benchmark only (bench/http.mjs), of the Express
// middleware of node-idempotency: packages/plugin-express/src/middleware.ts in
// https://github.com/mahendraHegde/node-idempotency (the package
// @node-idempotency/express 1.0.7; the file is unchanged since commit 865df0d,
// 2024-03-25; read at commit 622b33f3edb63ee2e864187bf564539c8dedea9d).
//
// @node-idempotency/express is not on the npm registry (404), so its TypeScript
// is written out here as JavaScript, statement for statement: the type
// annotations and `import type` lines are dropped, nothing else is changed (same
// calls, same order, same `void` fire-and-forget of the response caching, same
// swallowed non-IdempotencyError errors). It runs over the installed, pinned
// packages it imports upstream: @node-idempotency/core 1.0.11,
// @node-idempotency/shared 1.0.3 (whose http.ts and buildStorageAdapter match
// the snapshot's) and, through buildStorageAdapter,
// @node-idempotency/storage-adapter-memory 1.0.2. As its README requires, a body
// parser (express.json()) must run before it.
//
// Original code: MIT License, Copyright (c) 2024 Mahendra Kumar
//
// Permission is hereby granted, free of charge, to any person obtaining a copy
// of this software and associated documentation files (the "Software"), to deal
// in the Software without restriction, including without limitation the rights
// to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
// copies of the Software, and to permit persons to whom the Software is
// furnished to do so, subject to the following conditions:
//
// The above copyright notice and this permission notice shall be included in all
// copies or substantial portions of the Software.
//
// THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
// IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
// FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
// AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
// LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
// OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
// SOFTWARE.

import {
  buildStorageAdapter,
  headers2Cache,
  HTTPHeaderEnum,
  idempotency2HttpCodeMap,
} from "@node-idempotency/shared";
import {
  Idempotency,
  IdempotencyError,
  IdempotencyErrorCodes,
} from "@node-idempotency/core";

const getIdempotencyInstance = async (options) => {
  const storageAdapter = await buildStorageAdapter(options.storage);
  return new Idempotency(storageAdapter, options);
};

const setHeaders = (response, headers) => {
  Object.keys(headers).forEach((key) => {
    if (headers[key]) {
      void response.header(key, headers[key]);
    }
  });
};

const handleResponse = async (
  idempotencyReq,
  nodeIdempotency,
  response,
  payload,
) => {
  const { statusCode } = response;
  const headers = response.getHeaders();
  const additional = { statusCode };
  Object.values(headers2Cache).forEach((header) => {
    const head = headers[header] ?? headers[header.toLowerCase()];
    if (head) {
      additional[header] = head;
    }
  });
  try {
    const isJson = (headers["content-type"] ?? headers["Content-Type"])
      ?.toString()
      ?.toLowerCase()
      ?.includes("application/json");
    if (isJson && typeof payload === "string") {
      payload = JSON.parse(payload);
    }
  } catch {
    // ignore the error
  }
  const res = {
    additional,
    ...(statusCode < 400 ? { body: payload } : { error: payload }),
  };
  await nodeIdempotency.onResponse(idempotencyReq, res);
};

const successHandler = (nodeIdempotency) => {
  return async (request, response, next) => {
    const idempotencyReq = {
      headers: request.headers,
      body: request.body,
      path: request.url,
      method: request.method,
    };
    try {
      const idempotencyResponse = await nodeIdempotency.onRequest(idempotencyReq);
      if (!idempotencyResponse) {
        // fist time request, itercept and cache the response
        const originalSend = response.send.bind(response);
        response.send = function (body) {
          void handleResponse(
            idempotencyReq,
            nodeIdempotency,
            response,
            body,
          );
          return originalSend(body);
        };
        next();
        return;
      }
      // this is a duplicate request
      if (idempotencyResponse.additional?.statusCode) {
        const { statusCode } = idempotencyResponse.additional;
        void response.status(statusCode);
      }
      const headers = Object.values(headers2Cache).reduce((res, cur) => {
        if (idempotencyResponse?.additional?.[cur]) {
          res[cur] = idempotencyResponse.additional[cur];
        }
        return res;
      }, {});
      setHeaders(response, {
        ...headers,
        [HTTPHeaderEnum.idempotentReplayed]: "true",
      });
      if (idempotencyResponse.body) {
        response.send(idempotencyResponse.body);
      } else {
        next(idempotencyResponse.error);
      }
    } catch (err) {
      if (err instanceof IdempotencyError) {
        const status = idempotency2HttpCodeMap[err.code] || 500;
        if (err.code === IdempotencyErrorCodes.REQUEST_IN_PROGRESS) {
          setHeaders(response, { [HTTPHeaderEnum.retryAfter]: "1" });
        }
        void response.status(status);
        next(err);
      }
    }
  };
};

export const idempotencyAsMiddleware = async (options) => {
  const idempotency = await getIdempotencyInstance(options);
  return [successHandler(idempotency)];
};

// src/index.ts: `export * from "./middleware"; export * from "@node-idempotency/shared";`
export * from "@node-idempotency/shared";
