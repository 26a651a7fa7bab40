/**
 * The panel's icon: a nabla (the gradient) with a check mark. The `jp-icon3`
 * class lets the theme recolour it, so it reads in light and dark themes.
 */
import { LabIcon } from '@jupyterlab/ui-components';

const SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path fill-rule="evenodd" d="M2 3h14l-7 13.5z M5.3 5 9 12.2 12.7 5z"/>
    <path d="M13.6 17.6l2.1-2.1 2.6 2.6 4.3-4.3 2.1 2.1-6.4 6.4z"/>
  </g>
</svg>`;

export const gradcheckIcon = new LabIcon({
  name: 'jupyterlab-gradcheck:icon',
  svgstr: SVG
});
