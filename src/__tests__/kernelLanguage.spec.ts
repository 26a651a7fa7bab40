/**
 * A notebook's Python kernel is told JupyterLab's language once each time it
 * becomes ready, silently; another language's kernel is not told.
 */
import { Signal } from '@lumino/signaling';

import {
  IKernelLike,
  ISessionLike,
  languageCode,
  tellKernelLanguage
} from '../kernelLanguage';

function fakeSession(language: string) {
  const sent: { code: string; silent: boolean }[] = [];
  const kernel = (): IKernelLike => ({
    info: Promise.resolve({ language_info: { name: language } }),
    requestExecute: (content: { code: string; silent: boolean }) => {
      sent.push(content);
      return null;
    }
  });
  const statusChanged = new Signal<unknown, string>({});
  const session = { session: { kernel: kernel() }, statusChanged };
  return {
    session,
    sent,
    statusChanged,
    restart: () => (session.session = { kernel: kernel() })
  };
}

const settle = () => new Promise(resolve => setTimeout(resolve, 0));

describe('tellKernelLanguage', () => {
  it('tells a Python kernel once per start, again after a restart', async () => {
    // Given a notebook whose Python kernel goes idle twice, then restarts
    const fake = fakeSession('python');
    tellKernelLanguage(fake.session as ISessionLike, () => 'es-ES');
    fake.statusChanged.emit('idle');
    fake.statusChanged.emit('busy');
    fake.statusChanged.emit('idle');
    await settle();
    // Then it was told once, silently, the language as a tag
    expect(fake.sent).toEqual([
      { code: languageCode('es-ES'), silent: true, store_history: false }
    ]);
    expect(fake.sent[0].code).toContain('follow_interface("es-ES")');
    // When the kernel restarts and is idle again, then it is told again
    fake.statusChanged.emit('restarting');
    fake.restart();
    fake.statusChanged.emit('idle');
    await settle();
    expect(fake.sent).toHaveLength(2);
  });

  it('leaves a kernel of another language alone', async () => {
    const fake = fakeSession('R');
    tellKernelLanguage(fake.session as ISessionLike, () => 'es-ES');
    fake.statusChanged.emit('idle');
    await settle();
    expect(fake.sent).toEqual([]);
  });
});
