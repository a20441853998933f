import react from '@vitejs/plugin-react';
import { defineConfig } from 'vitest/config';

const backend = 'http://127.0.0.1:8000';

export default defineConfig(({ command }) => ({
  // Django serves dist/index.html at "/" (and /jobs/...) and dist/assets/* under
  // /static/assets/, so built asset URLs must start with /static/. The dev server
  // keeps "/" so that client-side routes (/, /new, /jobs/<id>) open directly.
  base: command === 'build' ? '/static/' : '/',
  // Vite 8 transforms TS/TSX with Oxc (the `esbuild` option is only a deprecated
  // alias there); plugin-react sets the automatic JSX runtime and adds Fast Refresh.
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    manifest: false,
    sourcemap: true,
  },
  server: {
    port: 5173,
    proxy: {
      '/api': { target: backend, changeOrigin: false },
      '/ws': { target: backend, ws: true, changeOrigin: false },
      '/accounts': { target: backend, changeOrigin: false },
    },
  },
  test: {
    environment: 'node',
    include: ['src/**/*.test.ts'],
  },
}));
